//! Writing to stdout for people and scripts. `orc … | head` closes the pipe early; that is
//! the reader's choice, not an error, so the process then ends quietly with status 0 instead
//! of panicking as `println!` would.

use std::io::Write as _;

/// Writes `text` to stdout; ends the process quietly when the reader has gone away.
pub fn write_out(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

/// `print!` that survives a closed pipe.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_out(&format!($($arg)*))
    };
}

/// `println!` that survives a closed pipe.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::output::write_out("\n")
    };
    ($($arg:tt)*) => {
        $crate::output::write_out(&format!("{}\n", format_args!($($arg)*)))
    };
}
