//! Passwords kept out of everything iolab shows or stores: the one place that knows where a
//! PostgreSQL connection string can carry one. `redact` hides it in any text (a URL, a key=value
//! conninfo, an error message that quotes either); `redact_args` hides it in a command line
//! before it is recorded (a run's `environment.command_line`, the settings journal). A leaf: it
//! imports nothing of iolab.
//!
//! The forms hidden, each replaced by `***`:
//! - `scheme://user:PASSWORD@host` (any scheme; the password ends at the URL's last `@`, so one
//!   holding an unencoded `@`, `/`, `?` or `:` is hidden whole),
//! - `?password=…` and `&password=…` query parameters (the key URL-encoded too, `sslpassword`
//!   as well), up to the next `&`,
//! - `password=…` in a key=value conninfo, quoted (`'…'`, with `\'` and `\\`) or not, with or
//!   without blanks around `=`.
use std::path::Path;

/// What a hidden password reads as.
pub const HIDDEN: &str = "***";

/// Whether `key` (as written, percent-decoded or not) names a password.
fn is_password_key(key: &str) -> bool {
    let key = percent_decoded(key);
    key.eq_ignore_ascii_case("password") || key.eq_ignore_ascii_case("sslpassword")
}

fn percent_decoded(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `text` with every password a connection string in it carries replaced by `***`.
pub(crate) fn redact(text: &str) -> String {
    conninfo_redacted(&urls_redacted(text))
}

/// A path or URL (a `--db`) as shown: a server's password hidden.
pub(crate) fn redact_path(p: &Path) -> String {
    redact(&p.to_string_lossy())
}

/// A command line as recorded: every argument redacted. The value of an option that names a
/// database (`--db`, `--db-b`, `--into`, fleet's `--store`, merge's sources) is an argument of
/// its own or follows `=` (`--db=VALUE`), where a conninfo keyword starts a word too.
pub(crate) fn redact_args<S: AsRef<str>>(args: impl IntoIterator<Item = S>) -> Vec<String> {
    args.into_iter().map(|a| redact(a.as_ref())).collect()
}

/// This process's command line, redacted (arguments that are not UTF-8 are read lossily).
pub fn command_line() -> Vec<String> {
    redact_args(std::env::args_os().map(|a| a.to_string_lossy().into_owned()))
}

/// Hide the password of every `scheme://` URL in `text` (the URL ends at a blank: a quote may be
/// part of its password).
fn urls_redacted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let start = at + 3;
        out.push_str(&rest[..start]);
        let end = rest[start..].find(char::is_whitespace).map_or(rest.len(), |e| start + e);
        out.push_str(&url_redacted(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The part of a URL after `scheme://`, its password hidden: in the query, then in the user
/// information. That ends at the URL's last `@`: a password holding a raw `@`, `/`, `?` or `:`
/// is hidden whole, at the price of hiding the host too where a later `@` (in a query value)
/// follows a password.
fn url_redacted(rest: &str) -> String {
    // `?password=` and `&password=` anywhere, each value up to the next `&` (as the parsers read
    // it: a raw `?` or `#` in it is hidden too).
    let mut out = String::with_capacity(rest.len());
    let mut tail = rest;
    while let Some(sep) = tail.find(['?', '&']) {
        out.push_str(&tail[..=sep]);
        tail = &tail[sep + 1..];
        let end = tail.find('&').unwrap_or(tail.len());
        match tail[..end].split_once('=') {
            Some((k, _)) if is_password_key(k) => {
                out.push_str(k);
                out.push('=');
                out.push_str(HIDDEN);
                tail = &tail[end..];
            }
            _ => {}
        }
    }
    out.push_str(tail);
    match out.rfind('@') {
        Some(at) if out[..at].contains(':') => {
            let user = &out[..out.find(':').unwrap_or(0)];
            format!("{user}:{HIDDEN}{}", &out[at..])
        }
        _ => out,
    }
}

/// Hide the value of every `password = VALUE` of a key=value conninfo in `text`: the keyword at
/// the start or after a blank, the value quoted (`'a b\'c'`) or up to the next blank (a
/// backslash escaping the character after it).
fn conninfo_redacted(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        // A keyword starts the text or follows a blank, `=` (`--db=password=…`), a quote or a
        // bracket (a message quoting a conninfo).
        let word_start = i == 0 || b[i - 1].is_ascii_whitespace() || b"=\"'([{,;".contains(&b[i - 1]);
        let key_len = ["sslpassword", "password"]
            .iter()
            .find(|k| word_start && b.len() >= i + k.len() && b[i..i + k.len()].eq_ignore_ascii_case(k.as_bytes()))
            .map(|k| k.len());
        let Some(key_len) = key_len else {
            i += 1;
            continue;
        };
        let mut j = i + key_len;
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        if j >= b.len() || b[j] != b'=' {
            i += key_len;
            continue;
        }
        j += 1;
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        let value_start = j;
        let quoted = j < b.len() && b[j] == b'\'';
        if quoted {
            j += 1;
        }
        while j < b.len() {
            match b[j] {
                // A backslash escapes the character after it, whatever its length.
                b'\\' => j += 1 + text[j + 1..].chars().next().map_or(0, char::len_utf8),
                b'\'' if quoted => {
                    j += 1;
                    break;
                }
                c if !quoted && c.is_ascii_whitespace() => break,
                _ => j += 1,
            }
        }
        out.push_str(&text[copied..value_start]);
        out.push_str(if quoted { "'***'" } else { HIDDEN });
        copied = j;
        i = j;
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_in_the_user_information_is_hidden() {
        assert_eq!(redact("postgresql://me:secret@db.lab/iolab"), "postgresql://me:***@db.lab/iolab");
        assert_eq!(
            redact("postgres://me:secret@db.lab:5433/iolab?application_name=x"),
            "postgres://me:***@db.lab:5433/iolab?application_name=x"
        );
        // Unencoded @, /, ? and : in the password: hidden whole.
        assert_eq!(redact("postgresql://me:p@ss/w?rd:x@db.lab/iolab"), "postgresql://me:***@db.lab/iolab");
        // URL-encoded.
        assert_eq!(redact("postgresql://me:p%40ss%2Fw@db.lab/iolab"), "postgresql://me:***@db.lab/iolab");
        // An empty password is still a password field.
        assert_eq!(redact("postgresql://me:@db.lab/iolab"), "postgresql://me:***@db.lab/iolab");
        // Any scheme (a BMC's URL too), and inside a message.
        assert_eq!(
            redact("results database https://root:calvin@bmc/redfish: cannot connect"),
            "results database https://root:***@bmc/redfish: cannot connect"
        );
        assert_eq!(redact("\"postgresql://me:pw@h/db\""), "\"postgresql://me:***@h/db\"");
        assert_eq!(redact("postgresql://me:it's\"@h/db"), "postgresql://me:***@h/db");
        // A raw / before the @ too; and a later @ hides the host rather than show the password.
        assert_eq!(redact("postgresql://me:a/b@h/db"), "postgresql://me:***@h/db");
        assert_eq!(redact("postgresql://me:pw@h/db?application_name=x@y"), "postgresql://me:***@y");
    }

    #[test]
    fn what_holds_no_password_is_left_as_it_is() {
        for s in [
            "postgresql://me@db.lab/iolab",
            "postgresql://db.lab:5432/iolab",
            "postgresql:///iolab?host=/run/postgresql",
            "postgresql://db.lab/iolab?application_name=me@lab",
            "iolab.db",
            "/data/runs/iolab.db",
            "host=db.lab user=me dbname=iolab",
            "the password file is not read",
            "",
        ] {
            assert_eq!(redact(s), s);
        }
    }

    #[test]
    fn a_password_query_parameter_is_hidden() {
        assert_eq!(redact("postgresql://me@db.lab/iolab?password=secret"), "postgresql://me@db.lab/iolab?password=***");
        assert_eq!(
            redact("postgresql://db.lab/iolab?user=me&password=se%26cret&application_name=x"),
            "postgresql://db.lab/iolab?user=me&password=***&application_name=x"
        );
        // The key URL-encoded, in capitals, or sslpassword.
        assert_eq!(redact("postgresql://db.lab/iolab?pass%77ord=secret"), "postgresql://db.lab/iolab?pass%77ord=***");
        assert_eq!(redact("postgresql://db.lab/iolab?PASSWORD=se?c#ret"), "postgresql://db.lab/iolab?PASSWORD=***");
        assert_eq!(redact("postgresql://db.lab/iolab?sslpassword=secret"), "postgresql://db.lab/iolab?sslpassword=***");
        // A raw @ in the value.
        assert_eq!(redact("postgresql://me@db.lab/iolab?password=a@b"), "postgresql://me@db.lab/iolab?password=***");
        // Both forms at once.
        assert_eq!(redact("postgresql://me:one@db.lab/iolab?password=two"), "postgresql://me:***@db.lab/iolab?password=***");
    }

    #[test]
    fn a_conninfo_password_is_hidden_quoted_or_not() {
        assert_eq!(redact("host=db.lab user=me password=secret dbname=iolab"), "host=db.lab user=me password=*** dbname=iolab");
        assert_eq!(redact("password = secret"), "password = ***");
        assert_eq!(redact("host=h password='a b\\'c' dbname=d"), "host=h password='***' dbname=d");
        assert_eq!(redact("host=h password=a\\ b dbname=d"), "host=h password=*** dbname=d");
        assert_eq!(redact("PASSWORD=x"), "PASSWORD=***");
        assert_eq!(redact("sslpassword=x user=me"), "sslpassword=*** user=me");
        // Unterminated: hidden to the end.
        assert_eq!(redact("user=me password='abc"), "user=me password='***'");
        assert_eq!(redact("password="), "password=***");
        assert_eq!(redact("password=\\é\\"), "password=***");
        assert_eq!(redact("cannot connect (\"password=x\")"), "cannot connect (\"password=***");
        // Not a keyword of its own: a word that ends in it, or no `=`.
        assert_eq!(redact("mypassword=x"), "mypassword=x");
        assert_eq!(redact("password file"), "password file");
    }

    #[test]
    fn a_command_line_is_recorded_without_passwords() {
        let argv =
            ["iolab", "sweep", "--db", "postgresql://me:secret@db.lab/iolab", "--db-b=postgres://me@db.lab/x?password=secret", "plan.toml"];
        assert_eq!(
            redact_args(argv),
            ["iolab", "sweep", "--db", "postgresql://me:***@db.lab/iolab", "--db-b=postgres://me@db.lab/x?password=***", "plan.toml",]
        );
        // merge's sources are arguments of their own; --into and --store their own options.
        assert_eq!(
            redact_args([
                "iolab",
                "merge",
                "postgresql://a:secret@h/db",
                "--into",
                "host=h password=secret",
                "--store=password=secret host=h"
            ]),
            ["iolab", "merge", "postgresql://a:***@h/db", "--into", "host=h password=***", "--store=password=*** host=h"]
        );
        // A database file is left as it is, even one with an @ or a : in its name.
        assert_eq!(
            redact_args(["iolab", "results", "--db", "/data/me@lab/run:1@x.db"]),
            ["iolab", "results", "--db", "/data/me@lab/run:1@x.db"]
        );
    }
}
