//! Golden files: what people read (CLI tables, pages, tenant messages), kept next to the
//! tests and compared whole.
//!
//! Built on `insta`: a mismatch fails the test with a diff, and `INSTA_UPDATE=always`
//! (or `cargo insta review`) writes the new text. In CI (`CI=true`) nothing is written.
//! Each file lives in the calling crate's `tests/golden/` as `<name>.snap`.

use std::path::Path;

/// Checks `actual` against the golden file `name` of the crate at `manifest_dir` (pass
/// `env!("CARGO_MANIFEST_DIR")`).
pub fn check(manifest_dir: &str, name: &str, actual: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(Path::new(manifest_dir).join("tests/golden"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.bind(|| insta::assert_snapshot!(name, actual));
}
