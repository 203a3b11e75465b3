//! The one frame of every server-rendered page: the access edge's sign-in, home and refusals,
//! the web console, and the partner's admin page.
//!
//! A surface says what is its own (the page's title and its surface's name, its style rules,
//! the scripts it loads, what its header, main and footer hold) and [`Shell::render`] writes
//! the document around it: the doctype, `<html lang="en">`, the character set, the viewport,
//! the title, one style sheet, then the body's landmarks in their order.
//!
//! Invariants, which the surfaces' content security policies rely on:
//! - Every value the frame writes (the title, its suffix, the scripts' paths) is escaped by
//!   `maud`, and the header, main and footer come as `maud` markup, escaped as it was built.
//!   The one text written as it is, the style sheet, is a `&'static str` fixed when the
//!   program is built, so no request can put markup into it.
//! - The frame writes no inline script: the scripts it is given are `&'static str` paths,
//!   loaded by `src` and deferred. (A surface's own content may still carry an inline script
//!   its policy allows by hash; that is the surface's to answer for.)
//! - Every page's sheet is made by [`style_sheet!`](crate::style_sheet!): the rules the
//!   surfaces share ([`BASE_STYLE`]: fonts, forms, tables, `.visually-hidden`) first, the
//!   surface's after, so a surface's rule wins over a shared one of the same weight.
//!
//! Behind the cargo feature `html`, so that crates that render no page do not build `maud`.

use maud::{DOCTYPE, Markup, PreEscaped, html};

/// A page's whole style sheet as one `&'static str` literal: the rules every page shares,
/// then the surface's own rules (string literals) in the order given.
///
/// A literal, not a `String`, so that a content security policy can hash the very constant
/// the page carries.
///
/// ```
/// const STYLE: &str = orc_common::style_sheet!("main{max-width:44rem}");
/// assert!(STYLE.starts_with(orc_common::html::BASE_STYLE));
/// assert!(STYLE.ends_with("main{max-width:44rem}"));
/// ```
#[macro_export]
macro_rules! style_sheet {
    ($($rules:literal),* $(,)?) => {
        concat!(
            ":root{font-family:system-ui,-apple-system,sans-serif;line-height:1.45}",
            "body{margin:0}",
            "label,legend{display:block;font-weight:600;margin:.6rem 0 .2rem}",
            "input,select,textarea,button{font:inherit}",
            "textarea{box-sizing:border-box;width:100%}",
            "code,pre,textarea{font-family:ui-monospace,monospace;font-size:.9em}",
            "button{cursor:pointer}",
            "table{border-collapse:collapse}",
            "th,td{text-align:left;vertical-align:top;padding:.4rem .6rem}",
            ".visually-hidden{position:absolute;left:-9999px}",
            $($rules),*
        )
    };
}

/// The rules every page shares, before its surface's own: the system font and line height,
/// labels over their fields, form controls in the page's font, code and text areas in a
/// monospace one a little smaller, tables with collapsed borders and left-aligned cells, and
/// `.visually-hidden` for text that only assistive technology reads (a table's caption).
///
/// Colours and layout are the surfaces' own: the admin page follows the reader's light or
/// dark scheme, the edge and the console have a fixed light one.
pub const BASE_STYLE: &str = style_sheet!();

/// One page, ready to be rendered.
///
/// ```
/// use orc_common::html::Shell;
/// use maud::html;
///
/// let page = Shell {
///     title: "Sign in",
///     title_suffix: "orc",
///     style: orc_common::style_sheet!("main{max-width:44rem}"),
///     scripts: &[],
///     header: None,
///     main: html! { h1 { "Sign in" } },
///     footer: None,
/// }
/// .render();
/// assert!(page.contains("<title>Sign in · orc</title>"));
/// ```
#[derive(Debug, Clone)]
pub struct Shell<'a> {
    /// What the page is; first in the `<title>`, so a tab shows it.
    pub title: &'a str,
    /// The product and surface after the title, as in `Pools · orc console`.
    pub title_suffix: &'a str,
    /// The page's style sheet, made by [`style_sheet!`](crate::style_sheet!), which puts
    /// [`BASE_STYLE`] first. Written into a `<style>` element as it is.
    pub style: &'static str,
    /// Paths of the scripts the page loads, in order, each by `src` and deferred.
    pub scripts: &'static [&'static str],
    /// What the page's `<header>` holds; no `<header>` without it.
    pub header: Option<Markup>,
    /// What the page's `<main>` holds.
    pub main: Markup,
    /// What the page's `<footer>` holds; no `<footer>` without it.
    pub footer: Option<Markup>,
}

impl Shell<'_> {
    /// The page's HTML document.
    pub fn render(self) -> String {
        debug_assert!(
            self.style.starts_with(BASE_STYLE),
            "a page's style sheet is made by style_sheet!"
        );
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { (self.title) " · " (self.title_suffix) }
                    style { (PreEscaped(self.style)) }
                    @for src in self.scripts {
                        script src=(src) defer {}
                    }
                }
                body {
                    @if let Some(content) = self.header {
                        header { (content) }
                    }
                    main { (self.main) }
                    @if let Some(content) = self.footer {
                        footer { (content) }
                    }
                }
            }
        }
        .into_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(title: &str) -> Shell<'_> {
        Shell {
            title,
            title_suffix: "orc test",
            style: style_sheet!("main{color:red}"),
            scripts: &["/a.js", "/b.js"],
            header: None,
            main: html! { p { "Hello" } },
            footer: None,
        }
    }

    #[test]
    fn a_title_with_markup_is_escaped() {
        let page = shell("<script>alert(1)</script> & co").render();
        assert!(
            page.contains(
                "<title>&lt;script&gt;alert(1)&lt;/script&gt; &amp; co · orc test</title>"
            )
        );
        assert!(!page.contains("<script>alert(1)"));
    }

    #[test]
    fn the_page_loads_the_scripts_given_deferred_and_no_other() {
        let page = shell("Scripts").render();
        assert!(page.contains(r#"<script src="/a.js" defer></script>"#));
        assert!(page.contains(r#"<script src="/b.js" defer></script>"#));
        assert!(page.find("/a.js") < page.find("/b.js"));
        assert_eq!(page.matches("<script").count(), 2);

        let none = Shell {
            scripts: &[],
            ..shell("No scripts")
        }
        .render();
        assert!(!none.contains("<script"));
    }

    #[test]
    fn header_and_footer_appear_only_when_given() {
        let bare = shell("Bare").render();
        assert!(!bare.contains("<header") && !bare.contains("<footer"));
        assert!(bare.contains("<body><main><p>Hello</p></main></body>"));

        let framed = Shell {
            header: Some(html! { a href="/" { "Home" } }),
            footer: Some(html! { "Made " em { "today" } }),
            ..shell("Framed")
        }
        .render();
        assert!(framed.contains(concat!(
            r#"<body><header><a href="/">Home</a></header>"#,
            "<main><p>Hello</p></main>",
            "<footer>Made <em>today</em></footer></body>",
        )));
    }

    #[test]
    fn the_head_is_the_same_on_every_page() {
        let page = shell("Head").render();
        assert!(page.starts_with(concat!(
            "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
            "<title>Head · orc test</title><style>",
        )));
        let sheet = format!("<style>{BASE_STYLE}main{{color:red}}</style>");
        assert!(page.contains(&sheet));
    }
}
