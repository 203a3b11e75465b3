//! Plain-text tables for people: a header row and aligned columns separated by two spaces,
//! no trailing spaces. Rows keep the order they are added in; callers add them in the API's
//! fixed order, so output is stable. Every cell and value is shown through
//! [`printable`](orc_common::text::printable): whatever a provider or a tenant put in a name
//! or a note, no control or bidirectional character of it reaches the terminal.

/// A table being built.
#[derive(Debug, Clone)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are empty, extra cells are dropped.
    pub fn row(&mut self, cells: Vec<String>) {
        let mut cells: Vec<String> = cells
            .into_iter()
            .map(|c| orc_common::text::printable(&c).into_owned())
            .collect();
        cells.resize(self.headers.len(), String::new());
        self.rows.push(cells);
    }

    /// The table as text, one line per row, each ending in a newline.
    pub fn render(&self) -> String {
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|i| {
                std::iter::once(&self.headers[i])
                    .chain(self.rows.iter().map(|r| &r[i]))
                    .map(|c| c.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in std::iter::once(&self.headers).chain(self.rows.iter()) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                line.push_str(cell);
                let pad = widths[i].saturating_sub(cell.chars().count());
                line.extend(std::iter::repeat_n(' ', pad));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Key/value lines with the keys aligned (`key:  value`).
pub fn fields(pairs: &[(&str, String)]) -> String {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (key, value) in pairs {
        let pad = width - key.len();
        let value = orc_common::text::printable(value);
        out.push_str(&format!("{key}:{}  {value}\n", " ".repeat(pad)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_lines_have_no_trailing_space() {
        let mut t = Table::new(&["NAME", "SIZE", "WORDS"]);
        t.row(vec!["web".into(), "3".into(), "".into()]);
        t.row(vec![
            "database".into(),
            "12".into(),
            "2 vCPU · 4 GiB".into(),
        ]);
        assert_eq!(
            t.render(),
            "NAME      SIZE  WORDS\nweb       3\ndatabase  12    2 vCPU · 4 GiB\n"
        );
    }

    #[test]
    fn cells_and_values_show_escape_sequences_instead_of_sending_them() {
        let mut t = Table::new(&["WORDS"]);
        t.row(vec!["\x1b[2Jgone\u{202E}txt".into()]);
        assert_eq!(t.render(), "WORDS\n\\u{1b}[2Jgone\\u{202e}txt\n");
        assert_eq!(fields(&[("note", "a\x07b".into())]), "note:  a\\u{7}b\n");
    }

    #[test]
    fn fields_align_keys() {
        assert_eq!(
            fields(&[("site", "a".into()), ("price", "b".into())]),
            "site:   a\nprice:  b\n"
        );
    }
}
