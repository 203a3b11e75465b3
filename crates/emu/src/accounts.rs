//! Accounts the emulators accept. Every account sees only its own resources.

use std::fmt;
use std::str::FromStr;

/// One emulated cloud account: `name` is the Robot user name and the key under which its
/// resources are kept; `secret` is the bearer token (Hetzner, Vultr) or Robot password.
#[derive(Clone, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub secret: String,
}

impl fmt::Debug for Account {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Account")
            .field("name", &self.name)
            .field("secret", &"<redacted>")
            .finish()
    }
}

impl FromStr for Account {
    type Err = String;

    /// Parses `NAME:SECRET`, as given to `--account`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once(':') {
            Some((name, secret)) if !name.is_empty() && !secret.is_empty() => Ok(Account {
                name: name.to_string(),
                secret: secret.to_string(),
            }),
            _ => Err("an account is NAME:SECRET, both non-empty".to_string()),
        }
    }
}

/// The set of accounts an emulator process accepts.
#[derive(Debug, Clone)]
pub struct Accounts(Vec<Account>);

impl Default for Accounts {
    /// One account, `demo` with secret `demo-token`.
    fn default() -> Self {
        Accounts(vec![Account {
            name: "demo".into(),
            secret: "demo-token".into(),
        }])
    }
}

impl Accounts {
    pub fn new(accounts: Vec<Account>) -> Self {
        if accounts.is_empty() {
            Accounts::default()
        } else {
            Accounts(accounts)
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Account> {
        self.0.iter()
    }

    /// The account whose secret is this bearer token.
    pub fn by_token(&self, token: &str) -> Option<&Account> {
        self.0.iter().find(|a| a.secret == token)
    }

    /// The account with this user name and password (Robot's basic auth).
    pub fn by_login(&self, name: &str, secret: &str) -> Option<&Account> {
        self.0.iter().find(|a| a.name == name && a.secret == secret)
    }
}
