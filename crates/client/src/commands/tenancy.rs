//! Tenancy from the command line, where it took `curl` before: `orc whoami`, and orgs,
//! projects, users, memberships and tokens (list, create, and remove or revoke).

use clap::Subcommand;
use orc_zone_api_types::views::{
    CreateMembership, CreateOrg, CreateProject, CreateToken, CreateUser, MembershipView,
    NewTokenView, OrgView, ProjectView, SetPassword, TokenView, UserView, WhoAmIView,
};

use orc_common::time::format_time;
use orc_zone_model::Timestamp;

use super::{client, print_json, project_path};
use crate::ConnArgs;
use crate::client::segment;
use crate::table::{Table, fields};

/// `orc org …`.
#[derive(Debug, Subcommand)]
pub enum OrgCommand {
    /// The orgs you can see.
    #[command(after_help = "Example: orc org list")]
    List,
    /// Create an org (zone operators).
    #[command(after_help = "Example: orc org create acme")]
    Create {
        /// NAME
        name: String,
    },
    /// Delete an org that holds no project (zone operators).
    #[command(after_help = "Example: orc org delete acme")]
    Delete {
        /// ORG
        org: String,
    },
}

/// `orc project …`.
#[derive(Debug, Subcommand)]
pub enum ProjectCommand {
    /// An org's projects.
    #[command(after_help = "Example: orc project list acme")]
    List {
        /// ORG
        org: String,
    },
    /// Create a project (owners of the org).
    #[command(after_help = "Example: orc project create acme/web")]
    Create {
        /// ORG/PROJECT
        project: String,
    },
    /// Delete a project that holds no pool and no provider (owners of the org).
    #[command(after_help = "Example: orc project delete acme/web")]
    Delete {
        /// ORG/PROJECT
        project: String,
    },
}

/// `orc user …`.
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Every user (zone operators).
    #[command(after_help = "Example: orc user list")]
    List,
    /// Create a user (zone operators); give them a role with `orc member add` and a token
    /// with `orc token create`.
    #[command(after_help = "Example: orc user create ann")]
    Create {
        /// NAME
        name: String,
    },
    /// Delete a user with their roles and tokens (zone operators); their tokens stop
    /// working at once.
    #[command(after_help = "Example: orc user delete ann")]
    Delete {
        /// USER
        user: String,
    },
    /// Set the password a user signs in with at the access edge (the user themselves, or a
    /// zone operator); their open sessions end. Read from the terminal without echo, or
    /// from stdin with --password-stdin (its first line).
    #[command(after_help = "Example: orc user set-password ann\n  \
                              or: printf '%s\\n' \"$PW\" | orc user set-password ann --password-stdin")]
    SetPassword {
        /// USER
        user: String,
        /// Read the password from stdin instead of asking on the terminal.
        #[arg(long)]
        password_stdin: bool,
    },
    /// Remove a user's password: they sign in at the edge with a token only, and their
    /// open sessions end.
    #[command(after_help = "Example: orc user remove-password ann")]
    RemovePassword {
        /// USER
        user: String,
    },
}

/// `orc member …`.
#[derive(Debug, Subcommand)]
pub enum MemberCommand {
    /// Who holds which role in an org and its projects.
    #[command(after_help = "Example: orc member list acme")]
    List {
        /// ORG
        org: String,
    },
    /// Give a user a role in an org, or in one project of it (owners).
    #[command(after_help = "Example: orc member add acme/web ann member")]
    Add {
        /// ORG or ORG/PROJECT
        scope: String,
        /// USER
        user: String,
        /// owner, member or viewer
        role: String,
    },
    /// Take a role away (owners).
    #[command(after_help = "Example: orc member remove acme m-00000000001a")]
    Remove {
        /// ORG
        org: String,
        /// The membership's id, as `orc member list` shows it (m-…)
        membership: String,
    },
}

/// `orc token …`.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// A user's tokens (never their values).
    #[command(after_help = "Example: orc token list ann")]
    List {
        /// USER (yourself, or anyone for zone operators)
        user: String,
    },
    /// Create a token; its value is printed this once.
    #[command(
        after_help = "Example: orc token create ann --label laptop --project acme/web > ann.token"
    )]
    Create {
        /// USER
        user: String,
        /// What it is for (laptop, ci)
        #[arg(long)]
        label: String,
        /// Days it lives: 1 to 365 [default: 90]
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=365))]
        days: Option<u32>,
        /// The project its commands mean when they name none; the user needs a role there
        #[arg(long, value_name = "ORG/PROJECT")]
        project: Option<String>,
    },
    /// Revoke a token; streams it opened close within seconds.
    #[command(after_help = "Example: orc token revoke ann t-00000000001c")]
    Revoke {
        /// USER
        user: String,
        /// The token's id, as `orc token list` shows it (t-…)
        #[arg(value_name = "TOKEN_ID")]
        token_id: String,
    },
}

fn time(at: i64) -> String {
    format_time(Timestamp(at))
}

fn tokens_table(tokens: &[TokenView]) -> String {
    let mut t = Table::new(&["ID", "LABEL", "PROJECT", "CREATED", "EXPIRES", "STATUS"]);
    for token in tokens {
        let status = if token.revoked_at.is_some() {
            "revoked"
        } else if token
            .expires_at
            .is_some_and(|at| at <= Timestamp::now().millis())
        {
            "expired"
        } else {
            "active"
        };
        t.row(vec![
            token.id.clone(),
            token.label.clone(),
            token.project.clone().unwrap_or_else(|| "-".into()),
            time(token.created_at),
            token.expires_at.map(time).unwrap_or_else(|| "never".into()),
            status.to_string(),
        ]);
    }
    t.render()
}

fn memberships_table(memberships: &[MembershipView]) -> String {
    let mut t = Table::new(&["ID", "USER", "ORG", "PROJECT", "ROLE"]);
    for m in memberships {
        t.row(vec![
            m.id.clone(),
            m.user.clone(),
            m.org.clone(),
            m.project.clone().unwrap_or_else(|| "(all)".into()),
            m.role.clone(),
        ]);
    }
    t.render()
}

/// `orc whoami`.
pub async fn whoami(conn: &ConnArgs) -> anyhow::Result<()> {
    let me: WhoAmIView = client(conn)?.get("/api/whoami").await?;
    if conn.json {
        return print_json(&me);
    }
    out!(
        "{}",
        fields(&[
            ("user", me.user.name.clone()),
            ("token", me.token_id.clone()),
            (
                "project",
                me.default_project
                    .clone()
                    .unwrap_or_else(|| "(none: commands name one)".into())
            ),
        ])
    );
    if me.memberships.is_empty() {
        outln!("No roles yet: a zone operator gives the first one with `orc member add`.");
    } else {
        out!("{}", memberships_table(&me.memberships));
    }
    Ok(())
}

/// `orc org …`.
pub async fn org(conn: &ConnArgs, command: OrgCommand) -> anyhow::Result<()> {
    let client = client(conn)?;
    match command {
        OrgCommand::List => {
            let orgs: Vec<OrgView> = client.get("/api/orgs").await?;
            if conn.json {
                return print_json(&orgs);
            }
            let mut t = Table::new(&["ORG", "CREATED"]);
            for o in &orgs {
                t.row(vec![o.name.clone(), time(o.created_at)]);
            }
            out!("{}", t.render());
        }
        OrgCommand::Create { name } => {
            let org: OrgView = client.post("/api/orgs", &CreateOrg { name }).await?;
            if conn.json {
                return print_json(&org);
            }
            outln!(
                "Org {} created. Next: `orc project create {}/NAME`.",
                org.name,
                org.name
            );
        }
        OrgCommand::Delete { org } => {
            let _: serde_json::Value = client
                .delete(&format!("/api/orgs/{}", segment(&org)))
                .await?;
            if !conn.json {
                outln!("Org {org} deleted.");
            }
        }
    }
    Ok(())
}

/// `orc project …`.
pub async fn project(conn: &ConnArgs, command: ProjectCommand) -> anyhow::Result<()> {
    let client = client(conn)?;
    match command {
        ProjectCommand::List { org } => {
            let projects: Vec<ProjectView> = client
                .get(&format!("/api/orgs/{}/projects", segment(&org)))
                .await?;
            if conn.json {
                return print_json(&projects);
            }
            let mut t = Table::new(&["PROJECT", "CREATED"]);
            for p in &projects {
                t.row(vec![format!("{}/{}", p.org, p.name), time(p.created_at)]);
            }
            out!("{}", t.render());
        }
        ProjectCommand::Create { project } => {
            let (org, name) = project_path(&project)?;
            let made: ProjectView = client
                .post(
                    &format!("/api/orgs/{}/projects", segment(&org)),
                    &CreateProject { name },
                )
                .await?;
            if conn.json {
                return print_json(&made);
            }
            outln!("Project {}/{} created.", made.org, made.name);
        }
        ProjectCommand::Delete { project } => {
            let (org, name) = project_path(&project)?;
            let _: serde_json::Value = client.delete(&super::project_url(&org, &name)).await?;
            if !conn.json {
                outln!("Project {org}/{name} deleted.");
            }
        }
    }
    Ok(())
}

/// `orc user …`.
pub async fn user(conn: &ConnArgs, command: UserCommand) -> anyhow::Result<()> {
    let client = client(conn)?;
    match command {
        UserCommand::List => {
            let users: Vec<UserView> = client.get("/api/users").await?;
            if conn.json {
                return print_json(&users);
            }
            let mut t = Table::new(&["USER", "CREATED"]);
            for u in &users {
                t.row(vec![u.name.clone(), time(u.created_at)]);
            }
            out!("{}", t.render());
        }
        UserCommand::Create { name } => {
            let user: UserView = client.post("/api/users", &CreateUser { name }).await?;
            if conn.json {
                return print_json(&user);
            }
            outln!(
                "User {} created. Next: `orc member add ORG[/PROJECT] {} ROLE` and \
                 `orc token create {} --label LABEL`.",
                user.name,
                user.name,
                user.name
            );
        }
        UserCommand::Delete { user } => {
            let _: serde_json::Value = client
                .delete(&format!("/api/users/{}", segment(&user)))
                .await?;
            if !conn.json {
                outln!("User {user} deleted, with their roles and tokens.");
            }
        }
        UserCommand::SetPassword {
            user,
            password_stdin,
        } => {
            let password = if password_stdin {
                read_first_line_of_stdin()?
            } else {
                let first = super::prompt::hidden(&format!("New password for {user}: "))?;
                let again = super::prompt::hidden("The same again: ")?;
                if first != again {
                    anyhow::bail!("the two passwords differ; nothing was changed");
                }
                first
            };
            let _: serde_json::Value = client
                .put(
                    &format!("/api/users/{}/password", segment(&user)),
                    &SetPassword { password },
                )
                .await?;
            if !conn.json {
                outln!("Password of {user} set; their open sessions ended.");
            }
        }
        UserCommand::RemovePassword { user } => {
            let _: serde_json::Value = client
                .delete(&format!("/api/users/{}/password", segment(&user)))
                .await?;
            if !conn.json {
                outln!("Password of {user} removed; they sign in with a token only.");
            }
        }
    }
    Ok(())
}

/// The first line of stdin, without its line end.
fn read_first_line_of_stdin() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let line = line.trim_end_matches(['\r', '\n']).to_string();
    if line.is_empty() {
        anyhow::bail!("--password-stdin read an empty line");
    }
    Ok(line)
}

/// `orc member …`.
pub async fn member(conn: &ConnArgs, command: MemberCommand) -> anyhow::Result<()> {
    let client = client(conn)?;
    match command {
        MemberCommand::List { org } => {
            let list: Vec<MembershipView> = client
                .get(&format!("/api/orgs/{}/memberships", segment(&org)))
                .await?;
            if conn.json {
                return print_json(&list);
            }
            out!("{}", memberships_table(&list));
        }
        MemberCommand::Add { scope, user, role } => {
            let (org, project) = match scope.split_once('/') {
                Some((org, project)) => (org.to_string(), Some(project.to_string())),
                None => (scope.clone(), None),
            };
            let made: MembershipView = client
                .post(
                    &format!("/api/orgs/{}/memberships", segment(&org)),
                    &CreateMembership {
                        user,
                        role,
                        project,
                    },
                )
                .await?;
            if conn.json {
                return print_json(&made);
            }
            outln!(
                "{} is now {} of {} ({}).",
                made.user,
                made.role,
                match &made.project {
                    Some(p) => format!("{}/{p}", made.org),
                    None => format!("org {}", made.org),
                },
                made.id
            );
        }
        MemberCommand::Remove { org, membership } => {
            let _: serde_json::Value = client
                .delete(&format!(
                    "/api/orgs/{}/memberships/{}",
                    segment(&org),
                    segment(&membership)
                ))
                .await?;
            if !conn.json {
                outln!("Membership {membership} removed.");
            }
        }
    }
    Ok(())
}

/// `orc token …`.
pub async fn token(conn: &ConnArgs, command: TokenCommand) -> anyhow::Result<()> {
    let client = client(conn)?;
    match command {
        TokenCommand::List { user } => {
            let list: Vec<TokenView> = client
                .get(&format!("/api/users/{}/tokens", segment(&user)))
                .await?;
            if conn.json {
                return print_json(&list);
            }
            out!("{}", tokens_table(&list));
        }
        TokenCommand::Create {
            user,
            label,
            days,
            project,
        } => {
            let request = CreateToken {
                label,
                expires_at: days
                    .map(|days| Timestamp::now().millis() + i64::from(days) * 24 * 3600 * 1000),
                project,
            };
            let made: NewTokenView = client
                .post(&format!("/api/users/{}/tokens", segment(&user)), &request)
                .await?;
            if conn.json {
                return print_json(&made);
            }
            // The value goes to stdout alone on its line, so `> file` keeps just it; the
            // words go to stderr.
            eprintln!(
                "Token {} of {} ({}), valid until {}; its value is shown this once:",
                made.token.id,
                made.token.user,
                made.token.label,
                made.token
                    .expires_at
                    .map(time)
                    .unwrap_or_else(|| "never".into())
            );
            outln!("{}", made.value);
        }
        TokenCommand::Revoke { user, token_id } => {
            let revoked: TokenView = client
                .delete(&format!(
                    "/api/users/{}/tokens/{}",
                    segment(&user),
                    segment(&token_id)
                ))
                .await?;
            if conn.json {
                return print_json(&revoked);
            }
            outln!(
                "Token {} of {} revoked; streams it opened close within seconds.",
                revoked.id,
                revoked.user
            );
        }
    }
    Ok(())
}
