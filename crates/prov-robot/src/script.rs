//! The shell text the bootstrap sends to a rescue system, generated as plain POSIX `sh`.
//!
//! Three pieces, none of which ever contains the join token:
//!
//! - [`token_command`]: the command line that stores the token it reads on stdin in a file
//!   created under `umask 077` in the rescue system's work directory;
//! - [`install_script`]: sent as stdin to `sh -s`. It picks the disks (every NVMe disk, else
//!   every SATA disk; software RAID 1 when there are two or more), writes installimage's
//!   config, builds the post-install script **in the rescue system** from
//!   [`post_install_body`] plus the token file, deletes the token file, runs installimage
//!   with that post-install script and finally shreds it (also when installimage fails);
//! - [`post_install_body`]: the part of the post-install script written here. Installimage
//!   runs the post-install script inside the freshly installed system; it places the token
//!   at `/etc/orc/join-token` (0600), downloads the agent over https and checks its SHA-256,
//!   installs the one-shot join unit and the agent unit, then shreds itself.
//!
//! Every value put into the text is validated ([`BootstrapParams::validate`]) and
//! single-quoted ([`sh_quote`]), so no input can end a quote or start a command.

use std::collections::BTreeMap;

use orc_provider_sdk::secret::Secret;

/// Where things are on the rescue system and in the installed system. The defaults are
/// Hetzner's rescue system; tests point them into a scratch directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RescueLayout {
    /// Scratch directory in the rescue system (token file, installimage config, post-install
    /// script).
    pub work_dir: String,
    /// Prefix of every path the post-install script writes; empty in production, where
    /// installimage runs the script inside the installed system.
    pub target_root: String,
    /// Where block devices are listed (`nvme0n1`, `sda`).
    pub sys_block: String,
    /// The installimage program.
    pub installimage: String,
    /// The directory holding installimage's images.
    pub image_dir: String,
    /// The file holding the machine's SMBIOS product UUID.
    pub product_uuid: String,
}

impl Default for RescueLayout {
    fn default() -> Self {
        RescueLayout {
            work_dir: "/root/orc-bootstrap".into(),
            target_root: String::new(),
            sys_block: "/sys/block".into(),
            installimage: "/root/.oldroot/nfs/install/installimage".into(),
            image_dir: "/root/.oldroot/nfs/images".into(),
            product_uuid: "/sys/class/dmi/id/product_uuid".into(),
        }
    }
}

/// Where the installed system keeps the join token.
pub const JOIN_TOKEN_PATH: &str = "/etc/orc/join-token";
/// Where the installed system keeps the agent.
pub const AGENT_PATH: &str = "/usr/local/bin/orc-agent";
/// The one-shot unit that joins the zone while the token file exists.
pub const JOIN_UNIT: &str = "orc-join.service";
/// The agent's unit.
pub const AGENT_UNIT: &str = "orc-agent.service";

/// What a bootstrap needs besides the machine.
#[derive(Clone)]
pub struct BootstrapParams {
    /// The single-use join token; it only ever travels as SSH stdin.
    pub join_token: Secret,
    /// Where the agent binary is downloaded from (https only).
    pub agent_url: String,
    /// The agent binary's SHA-256, lowercase hex.
    pub agent_sha256: String,
    /// The zone URL the agent joins.
    pub zone_url: String,
    /// Pins passed to `orc-agent join` as `--<name>-pin <value>`, sorted by name.
    pub pins: BTreeMap<String, String>,
    /// The installed system's host name.
    pub hostname: String,
    /// OpenSSH public keys (`authorized_keys` lines) the installed system's root accepts.
    pub ssh_keys: Vec<String>,
}

impl std::fmt::Debug for BootstrapParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BootstrapParams")
            .field("join_token", &"<redacted>")
            .field("agent_url", &self.agent_url)
            .field("agent_sha256", &self.agent_sha256)
            .field("zone_url", &self.zone_url)
            .field("pins", &self.pins)
            .field("hostname", &self.hostname)
            .field("ssh_keys", &self.ssh_keys.len())
            .finish()
    }
}

/// A bootstrap parameter that cannot be used, naming it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bootstrap parameter {field}: {problem}")]
pub struct ParamError {
    pub field: String,
    pub problem: String,
}

fn param_error(field: &str, problem: &str) -> ParamError {
    ParamError {
        field: field.to_string(),
        problem: problem.to_string(),
    }
}

/// Characters allowed in URLs and pins put into scripts and unit files: no quotes, no
/// whitespace, no `$`, no `%` (a systemd specifier), no backslash.
fn is_plain(text: &str) -> bool {
    !text.is_empty()
        && text.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    ':' | '/'
                        | '.'
                        | '_'
                        | '~'
                        | '?'
                        | '='
                        | '&'
                        | '+'
                        | ','
                        | '@'
                        | '-'
                        | '['
                        | ']'
                )
        })
}

/// A public key line usable in the post-install script's here-document: it starts with a
/// key type (so it can never be the delimiter) and holds printable ASCII only.
fn is_key_line(text: &str) -> bool {
    ["ssh-", "ecdsa-", "sk-"]
        .iter()
        .any(|t| text.starts_with(t))
        && text.len() <= 8192
        && text.chars().all(|c| c == ' ' || c.is_ascii_graphic())
}

/// A token usable in the post-install script: one line of visible ASCII.
fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 4096
        && text.chars().all(|c| c.is_ascii_graphic())
        && text != TOKEN_DELIMITER
}

impl BootstrapParams {
    /// Checks every field; the token's content is never part of an error.
    pub fn validate(&self) -> Result<(), ParamError> {
        if !is_token(self.join_token.expose()) {
            return Err(param_error(
                "join_token",
                "must be one line of visible ASCII characters, at most 4096",
            ));
        }
        if !(self.agent_url.starts_with("https://") && is_plain(&self.agent_url)) {
            return Err(param_error(
                "agent_url",
                "must be an https:// URL without spaces, quotes, '$' or '%'",
            ));
        }
        if !(self.agent_sha256.len() == 64
            && self
                .agent_sha256
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)))
        {
            return Err(param_error(
                "agent_sha256",
                "must be 64 lowercase hex digits",
            ));
        }
        if !((self.zone_url.starts_with("https://") || self.zone_url.starts_with("http://"))
            && is_plain(&self.zone_url))
        {
            return Err(param_error(
                "zone_url",
                "must be an http(s):// URL without spaces, quotes, '$' or '%'",
            ));
        }
        for (name, value) in &self.pins {
            let name_ok = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                && !name.starts_with('-');
            if !name_ok || !is_plain(value) {
                return Err(param_error(
                    &format!("pins.{name}"),
                    "names are lowercase words with '-', values have no spaces or quotes",
                ));
            }
        }
        let host_ok = !self.hostname.is_empty()
            && self.hostname.len() <= 63
            && self
                .hostname
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !self.hostname.starts_with('-');
        if !host_ok {
            return Err(param_error(
                "hostname",
                "must be a host name (letters, digits, '-', at most 63)",
            ));
        }
        for (i, key) in self.ssh_keys.iter().enumerate() {
            if !is_key_line(key) {
                return Err(param_error(
                    &format!("ssh_keys[{i}]"),
                    "must be one authorized_keys line: a key type (ssh-…, ecdsa-…, sk-…), \
                     then printable characters, at most 8192",
                ));
            }
        }
        Ok(())
    }
}

/// Single-quotes `text` for `sh`.
pub fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The argv of the one-shot join: `orc-agent join --zone URL --token-file PATH
/// [--NAME-pin VALUE]…`.
pub fn join_argv(zone_url: &str, pins: &BTreeMap<String, String>) -> Vec<String> {
    let mut argv = vec![
        AGENT_PATH.to_string(),
        "join".into(),
        "--zone".into(),
        zone_url.to_string(),
        "--token-file".into(),
        JOIN_TOKEN_PATH.to_string(),
    ];
    for (name, value) in pins {
        argv.push(format!("--{name}-pin"));
        argv.push(value.clone());
    }
    argv
}

/// The argv of the agent's service.
pub fn agent_argv(zone_url: &str) -> Vec<String> {
    vec![
        AGENT_PATH.to_string(),
        "run".into(),
        "--zone".into(),
        zone_url.to_string(),
    ]
}

/// The token file in the rescue system.
pub fn rescue_token_path(layout: &RescueLayout) -> String {
    format!("{}/join-token", layout.work_dir)
}

/// The command that stores the token arriving on stdin (step 2). Nothing of the token is
/// in it.
pub fn token_command(layout: &RescueLayout) -> String {
    let work = sh_quote(&layout.work_dir);
    let file = sh_quote(&rescue_token_path(layout));
    format!(
        "umask 077 && mkdir -p {work} && chmod 0700 {work} && rm -f {file} && cat > {file} && test -s {file}"
    )
}

/// The command that says whether the machine is in the rescue system and answers.
pub fn rescue_probe_command(layout: &RescueLayout) -> String {
    format!("test -x {}", sh_quote(&layout.installimage))
}

/// The command that prints the SMBIOS product UUID.
pub fn product_uuid_command(layout: &RescueLayout) -> String {
    format!("cat {}", sh_quote(&layout.product_uuid))
}

fn unit_exec(argv: &[String]) -> String {
    argv.join(" ")
}

/// The static part of the post-install script (step 4): everything but the token lines,
/// which the rescue system adds in front of it.
pub fn post_install_body(params: &BootstrapParams) -> String {
    let join = unit_exec(&join_argv(&params.zone_url, &params.pins));
    let agent = unit_exec(&agent_argv(&params.zone_url));
    let mut s = String::new();
    s.push_str(&format!("agent_url={}\n", sh_quote(&params.agent_url)));
    s.push_str(&format!(
        "agent_sha256={}\n",
        sh_quote(&params.agent_sha256)
    ));
    s.push_str(&format!(
        r#"chmod 0600 "$root{JOIN_TOKEN_PATH}"
mkdir -p "$root/usr/local/bin" "$root/etc/systemd/system/multi-user.target.wants"
download="$root{AGENT_PATH}.download"
rm -f "$download"
curl -fsSL --proto '=https' --tlsv1.2 --retry 3 -o "$download" "$agent_url"
if ! printf '%s  %s\n' "$agent_sha256" "$download" | sha256sum -c - >/dev/null 2>&1; then
  rm -f "$download"
  echo "orc: the agent download does not match its sha256" >&2
  exit 4
fi
chmod 0755 "$download"
mv -f "$download" "$root{AGENT_PATH}"
cat > "$root/etc/systemd/system/{JOIN_UNIT}" <<'ORC_UNIT_EOF'
[Unit]
Description=orc: join the zone with the single-use token
Wants=network-online.target
After=network-online.target
ConditionPathExists={JOIN_TOKEN_PATH}

[Service]
Type=oneshot
ExecStart={join}

[Install]
WantedBy=multi-user.target
ORC_UNIT_EOF
cat > "$root/etc/systemd/system/{AGENT_UNIT}" <<'ORC_UNIT_EOF'
[Unit]
Description=orc node agent
Wants=network-online.target
After=network-online.target {JOIN_UNIT}

[Service]
ExecStart={agent}
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
ORC_UNIT_EOF
chmod 0644 "$root/etc/systemd/system/{JOIN_UNIT}" "$root/etc/systemd/system/{AGENT_UNIT}"
ln -sf "../{JOIN_UNIT}" "$root/etc/systemd/system/multi-user.target.wants/{JOIN_UNIT}"
ln -sf "../{AGENT_UNIT}" "$root/etc/systemd/system/multi-user.target.wants/{AGENT_UNIT}"
"#
    ));
    if !params.ssh_keys.is_empty() {
        s.push_str(
            "mkdir -p \"$root/root/.ssh\"\nchmod 0700 \"$root/root/.ssh\"\n\
             cat >> \"$root/root/.ssh/authorized_keys\" <<'ORC_SSH_KEYS_END'\n",
        );
        for key in &params.ssh_keys {
            s.push_str(key);
            s.push('\n');
        }
        s.push_str("ORC_SSH_KEYS_END\nchmod 0600 \"$root/root/.ssh/authorized_keys\"\n");
    }
    s.push_str("shred -u \"$0\" 2>/dev/null || rm -f \"$0\"\n");
    s
}

/// The post-install script's head: shell options and the root prefix. The rescue system
/// appends the token lines and then [`post_install_body`].
pub fn post_install_head(layout: &RescueLayout) -> String {
    format!(
        "#!/bin/sh\nset -eu\numask 077\nroot={}\nmkdir -p \"$root/etc/orc\"\nchmod 0700 \"$root/etc/orc\"\n",
        sh_quote(&layout.target_root)
    )
}

/// The delimiter of the here-document that carries the token inside the post-install
/// script; [`BootstrapParams::validate`] refuses a token equal to it.
const TOKEN_DELIMITER: &str = "ORC_JOIN_TOKEN_END";

/// The script of step 3, sent as stdin of `sh -s`.
pub fn install_script(params: &BootstrapParams, layout: &RescueLayout, image: &str) -> String {
    let head = post_install_head(layout);
    let body = post_install_body(params);
    format!(
        r#"set -eu
umask 077
work={work}
token="$work/join-token"
post="$work/post-install.sh"
cleanup() {{
  for f in "$token" "$post"; do
    if [ -e "$f" ]; then shred -u "$f" 2>/dev/null || rm -f "$f"; fi
  done
}}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
[ -s "$token" ] || {{ echo "orc: the join token is missing in $work" >&2; exit 2; }}

drives=''
for d in {sys_block}/nvme*n1; do
  if [ -e "$d" ]; then drives="$drives ${{d##*/}}"; fi
done
if [ -z "$drives" ]; then
  for d in {sys_block}/sd[a-z]; do
    if [ -e "$d" ]; then drives="$drives ${{d##*/}}"; fi
  done
fi
if [ -z "$drives" ]; then
  echo "orc: no NVMe or SATA disk found" >&2
  exit 3
fi
count=0
{{
  for d in $drives; do
    count=$((count + 1))
    echo "DRIVE$count /dev/$d"
  done
  if [ "$count" -ge 2 ]; then
    echo "SWRAID 1"
    echo "SWRAIDLEVEL 1"
  else
    echo "SWRAID 0"
  fi
  echo "HOSTNAME "{hostname}
  echo "BOOTLOADER grub"
  echo "PART /boot ext3 1024M"
  echo "PART / ext4 all"
  echo "IMAGE "{image_path}
}} > "$work/install.conf"

{{
  cat <<'ORC_HEAD_EOF'
{head}ORC_HEAD_EOF
  printf '%s\n' 'cat > "$root{token_path}" <<'"'"'{delim}'"'"''
  cat "$token"
  printf '\n%s\n' '{delim}'
  cat <<'ORC_BODY_EOF'
{body}ORC_BODY_EOF
}} > "$post"
chmod 0700 "$post"
shred -u "$token" 2>/dev/null || rm -f "$token"

{installimage} -a -c "$work/install.conf" -x "$post"
"#,
        work = sh_quote(&layout.work_dir),
        sys_block = sh_quote(&layout.sys_block),
        hostname = sh_quote(&params.hostname),
        image_path = sh_quote(&format!("{}/{image}", layout.image_dir)),
        installimage = sh_quote(&layout.installimage),
        token_path = JOIN_TOKEN_PATH,
        delim = TOKEN_DELIMITER,
    )
}
