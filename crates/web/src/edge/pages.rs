//! The edge's own pages: sign-in, the signed-in home with the endpoints a person may open,
//! and refusals. Server rendered (`maud` escapes every value) in the pages' shared frame
//! ([`orc_common::html::Shell`]), no JavaScript, one small inline style sheet.

use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use orc_common::html::Shell;

use super::Reachable;
use crate::visitor::Person;

/// The edge's style sheet: the shared rules, then the zone's colours, a narrow column and
/// the sign-in cards.
const STYLE: &str = orc_common::style_sheet!(
    "body{color:#1b1f24;background:#f6f7f9}\
header{background:#1b2a41;color:#fff;padding:.8rem 1.5rem;display:flex;align-items:center;\
justify-content:space-between}\
header a{color:#fff}main{max-width:44rem;margin:2rem auto;padding:0 1.5rem}\
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:1.8rem}\
form.card{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:1rem 1.2rem;\
margin:1rem 0}\
input[type=text],input[type=password]{width:100%;box-sizing:border-box;padding:.45rem;\
border:1px solid #8c959f;border-radius:4px}\
button{margin-top:.9rem;padding:.45rem 1rem;border:0;border-radius:4px;background:#1f6feb;\
color:#fff}\
header button{margin:0;background:#3d4f6b}\
.error{background:#ffebe9;border:1px solid #cf222e;color:#82071e;padding:.6rem .8rem;\
border-radius:4px}\
table{width:100%;background:#fff}\
th,td{border-bottom:1px solid #d0d7de}"
);

fn layout(title: &str, edge_url: &str, signed_in: Option<&Person>, content: Markup) -> String {
    Shell {
        title,
        title_suffix: "orc",
        style: STYLE,
        scripts: &[],
        header: Some(html! {
            a href={ (edge_url) "/" } { strong { "orc" } " zone" }
            @if let Some(person) = signed_in {
                form method="post" action={ (edge_url) "/sign-out" } {
                    span { "Signed in as " (person.user.name) " " }
                    button type="submit" { "Sign out" }
                }
            }
        }),
        main: content,
        footer: None,
    }
    .render()
}

/// The sign-in page: an API token, or a user name and password.
pub(super) fn sign_in(
    edge_url: &str,
    next: Option<&str>,
    error: Option<&str>,
    status: StatusCode,
) -> Response {
    let content = html! {
        h1 { "Sign in" }
        @if let Some(error) = error {
            p.error role="alert" { (error) }
        }
        @if let Some(next) = next {
            p { "You will go on to " code { (next) } " after signing in." }
        }
        form.card method="post" action={ (edge_url) "/sign-in" } {
            h2 { "With an API token" }
            label for="token" { "API token" }
            input #token type="password" name="token" autocomplete="off"
                aria-describedby="token-help";
            p #token-help { "A token of yours, such as the one in the zone's admin-token file." }
            @if let Some(next) = next { input type="hidden" name="next" value=(next); }
            button type="submit" { "Sign in with the token" }
        }
        form.card method="post" action={ (edge_url) "/sign-in" } {
            h2 { "With a password" }
            label for="user" { "User name" }
            input #user type="text" name="user" autocomplete="username";
            label for="password" { "Password" }
            input #password type="password" name="password" autocomplete="current-password";
            @if let Some(next) = next { input type="hidden" name="next" value=(next); }
            button type="submit" { "Sign in with the password" }
        }
    };
    super::html(status, layout("Sign in", edge_url, None, content))
}

/// The signed-in home: who, and the endpoints they may open.
pub(super) fn home(
    edge_url: &str,
    person: &Person,
    endpoints: &[Reachable],
    console: bool,
) -> Response {
    let content = html! {
        @if console {
            p { a href={ (edge_url) "/orgs" } { "Open the console" } ": your projects, pools, providers, usage, members and API tokens." }
        }
        h1 { "Your endpoints" }
        @if endpoints.is_empty() {
            p { "Nothing you may open is served here yet: no pool with an http endpoint, no app with a private service." }
        } @else {
            table {
                caption.visually-hidden { "Endpoints you may open" }
                thead { tr { th scope="col" { "Pool or app" } th scope="col" { "Endpoint or service" } th scope="col" { "Address" } } }
                tbody {
                    @for e in endpoints {
                        tr {
                            td { (e.pool) }
                            td { (e.endpoint) }
                            td { a href=(e.url) { (e.url) } }
                        }
                    }
                }
            }
        }
    };
    super::html(
        StatusCode::OK,
        layout("Your endpoints", edge_url, Some(person), content),
    )
}

/// A refusal or failure, with a link home when there is one.
pub(super) fn refusal(
    status: StatusCode,
    title: &str,
    message: &str,
    home: Option<&str>,
) -> Response {
    let content = html! {
        h1 { (title) }
        p { (message) }
        @if let Some(home) = home {
            p { a href={ (home) "/" } { "Your endpoints" } " · " a href={ (home) "/sign-in" } { "Sign in" } }
        }
    };
    super::html(status, layout(title, home.unwrap_or(""), None, content))
}
