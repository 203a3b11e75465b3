//! The shape of the bootstrap the zone sends with a deploy (`Deploy.bootstrap`): a POSIX `sh`
//! script that carries the node's join token in one block of its own,
//!
//! ```text
//! cat > /etc/orc/join-token <<'ORC_TOKEN'
//! orcjoin1.…
//! ORC_TOKEN
//! ```
//!
//! A cloud provider passes the whole script as user data. A provider that delivers the
//! token another way (over SSH stdin, to a machine that has no user data) takes the script
//! apart with [`split_token`]: the token alone, and the rest, which writes everything else
//! and expects the token file in place before it runs.

/// Where the bootstrap writes the token, and where the agent reads it.
pub const JOIN_TOKEN_PATH: &str = "/etc/orc/join-token";

/// The line that opens the token block.
pub const TOKEN_BLOCK_START: &str = "cat > /etc/orc/join-token <<'ORC_TOKEN'";

/// The line that closes it.
pub const TOKEN_BLOCK_END: &str = "ORC_TOKEN";

/// The token block of `token`, lines ending in `\n`.
pub fn token_block(token: &str) -> String {
    format!("{TOKEN_BLOCK_START}\n{token}\n{TOKEN_BLOCK_END}\n")
}

/// A bootstrap taken apart: the token, and the script without its token block.
#[derive(Clone, PartialEq, Eq)]
pub struct SplitBootstrap {
    pub token: String,
    pub script: String,
}

impl std::fmt::Debug for SplitBootstrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SplitBootstrap")
            .field("token", &"<redacted>")
            .field("script", &format!("<{} bytes>", self.script.len()))
            .finish()
    }
}

/// Takes the token block out of `script`. `None` unless the script holds exactly one token
/// block of one non-empty line.
pub fn split_token(script: &str) -> Option<SplitBootstrap> {
    let lines: Vec<&str> = script.split_inclusive('\n').collect();
    let starts: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.trim_end_matches('\n') == TOKEN_BLOCK_START)
        .map(|(i, _)| i)
        .collect();
    let [start] = starts.as_slice() else {
        return None;
    };
    let token = lines.get(start + 1)?.trim_end_matches('\n');
    let end = lines.get(start + 2)?;
    if token.is_empty() || token == TOKEN_BLOCK_END || end.trim_end_matches('\n') != TOKEN_BLOCK_END
    {
        return None;
    }
    let mut rest = String::with_capacity(script.len());
    for (i, line) in lines.iter().enumerate() {
        if !(*start..start + 3).contains(&i) {
            rest.push_str(line);
        }
    }
    Some(SplitBootstrap {
        token: token.to_string(),
        script: rest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_block_comes_out_whole_and_the_rest_stays_in_order() {
        let script = format!(
            "#!/bin/sh\nmkdir -p /etc/orc\n{}echo after\n",
            token_block("orcjoin1.abc.def")
        );
        let split = split_token(&script).unwrap();
        assert_eq!(split.token, "orcjoin1.abc.def");
        assert_eq!(split.script, "#!/bin/sh\nmkdir -p /etc/orc\necho after\n");
        assert!(!format!("{split:?}").contains("abc"));
    }

    #[test]
    fn scripts_without_exactly_one_good_block_are_not_split() {
        assert_eq!(split_token("#!/bin/sh\necho hi\n"), None);
        let twice = format!("{}{}", token_block("a"), token_block("b"));
        assert_eq!(split_token(&twice), None);
        let empty = format!("{TOKEN_BLOCK_START}\n\n{TOKEN_BLOCK_END}\n");
        assert_eq!(split_token(&empty), None);
        let open = format!("{TOKEN_BLOCK_START}\norcjoin1.x\n");
        assert_eq!(split_token(&open), None);
    }
}
