//! Text that came from elsewhere (a provider's progress words, a cloud's message, a name a
//! tenant typed) made safe to store and to show.
//!
//! Two dangers: control characters (a terminal acts on `ESC [ 2 J` and its kin, a newline
//! forges a second log line) and Unicode's bidirectional controls, which reorder what a
//! reader sees (after an RLO, U+202E, text shows backwards). [`clean_line`] removes both and
//! caps the length, for text that is stored; [`printable`] makes them visible as `\u{…}`
//! escapes, for text that is shown as it was stored.

use std::borrow::Cow;

/// Whether `c` is a bidirectional formatting character (embeddings, overrides, isolates and
/// marks).
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// Whether `c` shows as nothing (or as a blank) while being a character: zero-width spaces,
/// joiners and non-joiners, the word joiner and invisible operators, the byte-order mark,
/// the soft hyphen, fillers and tag characters. Two names that differ only in these read
/// the same, and tag characters can smuggle text past a reader.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200D}'
            | '\u{2060}'..='\u{2064}'
            | '\u{206A}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{E0000}'..='\u{E007F}'
    )
}

/// Whether `c` is unsafe to show as it is: a control character or a bidirectional control.
pub fn is_unsafe(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// One line of at most `max_bytes` bytes: control and bidirectional characters removed
/// (tabs and line breaks become spaces), runs of spaces left as they are, and a longer
/// text cut at a character boundary with `…` at its end (the `…` counts in `max_bytes`).
pub fn clean_line(text: &str, max_bytes: usize) -> String {
    const MORE: char = '…';
    let mut out = String::with_capacity(text.len().min(max_bytes));
    for c in text.chars() {
        let c = match c {
            '\t' | '\n' | '\r' => ' ',
            c if is_unsafe(c) => continue,
            c => c,
        };
        if out.len() + c.len_utf8() > max_bytes {
            while out.len() + MORE.len_utf8() > max_bytes {
                out.pop();
            }
            out.push(MORE);
            return out;
        }
        out.push(c);
    }
    out
}

/// `text` with every unsafe character shown as a `\u{…}` escape, so nothing it holds acts on
/// the terminal or reorders what is around it. Borrowed when there is nothing to escape.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unsafe(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// How many characters of a bad value an error message quotes.
pub const QUOTED_CHARS: usize = 40;

/// Shows a value an error is about: in double quotes and escaped like `{:?}`, but only its
/// first [`QUOTED_CHARS`] characters, with `…` after them when there is more. An error about
/// a megabyte of input says what it was about in one short line.
pub fn quoted(value: &str) -> Quoted<'_> {
    Quoted(value)
}

/// See [`quoted`].
#[derive(Debug, Clone, Copy)]
pub struct Quoted<'a>(&'a str);

impl std::fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.char_indices().nth(QUOTED_CHARS) {
            None => write!(f, "{:?}", self.0),
            Some((cut, _)) => {
                let shown = format!("{:?}", &self.0[..cut]);
                write!(f, "{}…\"", &shown[..shown.len() - 1])
            }
        }
    }
}

/// A DNS label made of `text`: lower case, every character other than a letter or digit
/// turned into `-`, at most 63 characters, with no `-` at its end (it may be empty).
pub fn dns_label(text: &str) -> String {
    let mut label: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    while label.ends_with('-') {
        label.pop();
    }
    label
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels_hold_letters_digits_and_inner_dashes() {
        assert_eq!(dns_label("Mia's Laptop_2"), "mia-s-laptop-2");
        assert_eq!(dns_label("ends-with--"), "ends-with");
        assert_eq!(dns_label(&"x".repeat(100)).len(), 63);
        assert_eq!(dns_label("é"), "");
    }

    #[test]
    fn clean_lines_hold_no_control_or_bidi_character_and_keep_their_cap() {
        let attack = "ok\x1b[2J\x1b]0;owned\x07 next\nline\u{202E}txt.exe\u{2066}";
        assert_eq!(clean_line(attack, 1024), "ok[2J]0;owned next linetxt.exe");
        let long = "é".repeat(100_000);
        let capped = clean_line(&long, 1024);
        assert!(capped.len() <= 1024, "{}", capped.len());
        assert!(capped.ends_with('…'));
        assert_eq!(clean_line("short", 1024), "short");
        assert_eq!(clean_line("abcdef", 4), "a…");
    }

    #[test]
    fn zero_width_and_other_invisible_characters_are_told_apart_from_visible_ones() {
        for c in [
            '\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{FEFF}', '\u{00AD}',
        ] {
            assert!(is_invisible(c), "{c:?}");
        }
        assert!(is_invisible('\u{E0041}'), "a tag character");
        for c in ['a', ' ', 'é', '\u{2764}', '\u{FE0F}', '\u{3000}'] {
            assert!(!is_invisible(c), "{c:?}");
        }
    }

    #[test]
    fn quoted_values_are_short_and_escaped() {
        assert_eq!(quoted("web").to_string(), "\"web\"");
        assert_eq!(quoted("a\x1bb").to_string(), "\"a\\u{1b}b\"");
        let long = quoted(&"x".repeat(1_000_000)).to_string();
        assert_eq!(long, format!("\"{}…\"", "x".repeat(QUOTED_CHARS)));
    }

    #[test]
    fn printable_text_shows_what_would_act_on_a_terminal() {
        assert!(matches!(
            printable("plain words"),
            Cow::Borrowed("plain words")
        ));
        assert_eq!(printable("a\x1b[31mb"), "a\\u{1b}[31mb");
        assert_eq!(printable("x\u{202E}y"), "x\\u{202e}y");
    }
}
