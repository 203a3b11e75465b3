//! The shell text the bootstrap sends to a rescue system, generated as plain POSIX `sh`.
//!
//! The zone gives a node two things: a first-boot script (it writes the zone CA and the
//! agent's settings, installs `orc` and starts `orc agent`; nothing secret) and a single-use
//! join token, which the agent reads from [`JOIN_TOKEN_PATH`]. Three pieces carry them, and
//! none of them ever contains the token:
//!
//! - [`token_command`]: the command line that stores the token it reads on stdin in a file
//!   created under `umask 077` in the rescue system's work directory;
//! - [`install_script`]: sent as stdin to `sh -s`. It picks the disks (every NVMe disk, else
//!   every SATA disk; software RAID 1 when there are two or more), writes installimage's
//!   config, builds the post-install script **in the rescue system** from
//!   [`post_install_head`], the token file and [`post_install_body`], deletes the token
//!   file, runs installimage with that post-install script and finally shreds it (also when
//!   installimage fails);
//! - [`post_install_body`]: the part of the post-install script written here. Installimage
//!   runs the post-install script inside the freshly installed system; it leaves the token
//!   at [`JOIN_TOKEN_PATH`] (0600), the first-boot script at [`FIRST_BOOT_PATH`] (0700) and
//!   enables [`FIRST_BOOT_UNIT`], which runs that script once and deletes it; then the
//!   post-install script shreds itself. Nothing is downloaded at install time.
//!
//! Every value put into the text is validated ([`BootstrapParams::validate`]): short values
//! are single-quoted ([`sh_quote`]), the first-boot script and the SSH keys travel in quoted
//! here-documents whose delimiters they may not contain, so no input can end a quote or
//! start a command.

use orc_common::Secret;

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

/// Where the installed system keeps the join token; the agent reads it from here.
pub const JOIN_TOKEN_PATH: &str = orc_proto::bootstrap::JOIN_TOKEN_PATH;
/// Where the installed system keeps the first-boot script until it has run.
pub const FIRST_BOOT_PATH: &str = "/var/lib/orc/first-boot.sh";
/// The one-shot unit that runs the first-boot script and then deletes it.
pub const FIRST_BOOT_UNIT: &str = "orc-first-boot.service";

/// The largest first-boot script accepted, in bytes.
const FIRST_BOOT_MAX: usize = 256 * 1024;

/// What a bootstrap needs besides the machine.
#[derive(Clone)]
pub struct BootstrapParams {
    /// The single-use join token; it only ever travels as SSH stdin.
    pub join_token: Secret,
    /// The script the installed system runs once, at its first boot (it carries no secret).
    pub first_boot: String,
    /// The installed system's host name.
    pub hostname: String,
    /// OpenSSH public keys (`authorized_keys` lines) the installed system's root accepts.
    pub ssh_keys: Vec<String>,
}

impl std::fmt::Debug for BootstrapParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BootstrapParams")
            .field("join_token", &"<redacted>")
            .field("first_boot_bytes", &self.first_boot.len())
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

/// What makes `text` unusable as the first-boot script, if anything. It travels inside two
/// quoted here-documents (the post-install script's and, around that, the install script's),
/// so no line may equal either delimiter.
fn first_boot_problem(text: &str) -> Option<&'static str> {
    if !text.starts_with("#!") {
        Some("must start with '#!' (an interpreter line)")
    } else if text.len() > FIRST_BOOT_MAX {
        Some("must be at most 256 KiB")
    } else if text.contains('\0') {
        Some("must not contain a NUL character")
    } else if text
        .split('\n')
        .any(|line| line == FIRST_BOOT_DELIMITER || line == BODY_DELIMITER)
    {
        Some("must not contain a line equal to ORC_FIRST_BOOT_END or ORC_BODY_EOF")
    } else {
        None
    }
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
        if let Some(problem) = first_boot_problem(&self.first_boot) {
            return Err(param_error("first_boot", problem));
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

/// The static part of the post-install script (step 4): everything but the token lines,
/// which the rescue system adds in front of it. It writes the first-boot script (a final
/// newline is added when it has none) and the unit that runs it once, root's SSH keys, and
/// then shreds the post-install script itself.
pub fn post_install_body(params: &BootstrapParams) -> String {
    let mut s = format!(
        "chmod 0600 \"$root{JOIN_TOKEN_PATH}\"\n\
         cat > \"$root{FIRST_BOOT_PATH}\" <<'{FIRST_BOOT_DELIMITER}'\n"
    );
    s.push_str(&params.first_boot);
    if !params.first_boot.ends_with('\n') {
        s.push('\n');
    }
    s.push_str(&format!(
        r#"{FIRST_BOOT_DELIMITER}
chmod 0700 "$root{FIRST_BOOT_PATH}"
mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
cat > "$root/etc/systemd/system/{FIRST_BOOT_UNIT}" <<'ORC_UNIT_EOF'
[Unit]
Description=orc: the node's first boot (joins the zone and starts the agent)
Wants=network-online.target
After=network-online.target
ConditionPathExists={FIRST_BOOT_PATH}

[Service]
Type=oneshot
ExecStart=/bin/sh {FIRST_BOOT_PATH}
ExecStopPost=/bin/rm -f {FIRST_BOOT_PATH}

[Install]
WantedBy=multi-user.target
ORC_UNIT_EOF
chmod 0644 "$root/etc/systemd/system/{FIRST_BOOT_UNIT}"
ln -sf "../{FIRST_BOOT_UNIT}" "$root/etc/systemd/system/multi-user.target.wants/{FIRST_BOOT_UNIT}"
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

/// The post-install script's head: shell options, the root prefix and the private
/// directories. The rescue system appends the token lines and then [`post_install_body`].
pub fn post_install_head(layout: &RescueLayout) -> String {
    format!(
        "#!/bin/sh\nset -eu\numask 077\nroot={}\n\
         mkdir -p \"$root/etc/orc\"\nchmod 0700 \"$root/etc/orc\"\n\
         mkdir -p \"$root/var/lib/orc\"\nchmod 0700 \"$root/var/lib/orc\"\n",
        sh_quote(&layout.target_root)
    )
}

/// The delimiter of the here-document that carries the token inside the post-install
/// script; [`BootstrapParams::validate`] refuses a token equal to it.
const TOKEN_DELIMITER: &str = "ORC_JOIN_TOKEN_END";

/// The delimiter of the here-document that carries the first-boot script inside the
/// post-install script.
const FIRST_BOOT_DELIMITER: &str = "ORC_FIRST_BOOT_END";

/// The delimiter of the here-document that carries [`post_install_body`], and with it the
/// first-boot script, inside the install script.
const BODY_DELIMITER: &str = "ORC_BODY_EOF";

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
  cat <<'{body_delim}'
{body}{body_delim}
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
        body_delim = BODY_DELIMITER,
    )
}
