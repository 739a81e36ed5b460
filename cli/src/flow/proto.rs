//! The session's wire format: one JSON object per line each way over the unix socket
//! (`{"op":"add",...}` → `{"ok":true,"id":3}`), and the rule it carries.

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixStream;
use std::path::Path;

use anyhow::{anyhow, bail, Context as _, Result};
use serde_json::{json, Value};

/// Where a rule sends a frame it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum To {
    /// The session's receive QP of this index.
    Qp(u32),
    Drop,
    /// On to the next table (or the vport default): counting or tagging only.
    Pass,
    Table(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action {
    pub to: To,
    pub count: bool,
    pub tag: u32,
}

/// A rule as `flow add` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSpec {
    pub table: u32,
    pub prio: u8,
    /// The match text (syntax::parse's input; syntax::show's output once installed).
    pub matches: String,
    pub action: Action,
}

impl Action {
    pub fn to_json(&self) -> Value {
        let to = match self.to {
            To::Qp(i) => json!({"qp": i}),
            To::Drop => json!("drop"),
            To::Pass => json!("pass"),
            To::Table(t) => json!({"table": t}),
        };
        json!({"to": to, "count": self.count, "tag": self.tag})
    }

    pub fn from_json(v: &Value) -> Result<Action> {
        let to = match &v["to"] {
            Value::String(s) if s == "drop" => To::Drop,
            Value::String(s) if s == "pass" => To::Pass,
            t if t["qp"].is_u64() => To::Qp(t["qp"].as_u64().unwrap_or(0) as u32),
            t if t["table"].is_u64() => To::Table(t["table"].as_u64().unwrap_or(0) as u32),
            t => bail!("bad action target {t}"),
        };
        Ok(Action { to, count: v["count"].as_bool().unwrap_or(false), tag: v["tag"].as_u64().unwrap_or(0) as u32 })
    }

    /// The action as `flow list` prints it, in `flow add`'s words.
    pub fn show(&self) -> String {
        let mut s = match self.to {
            To::Qp(i) => format!("--to-qp {i}"),
            To::Drop => "--drop".into(),
            To::Pass => "--pass".into(),
            To::Table(t) => format!("--to-table {t}"),
        };
        if self.count {
            s.push_str(" --count");
        }
        if self.tag != 0 {
            s.push_str(&format!(" --tag {}", self.tag));
        }
        s
    }
}

impl RuleSpec {
    pub fn to_json(&self) -> Value {
        json!({"op": "add", "table": self.table, "prio": self.prio, "match": self.matches, "action": self.action.to_json()})
    }

    pub fn from_json(v: &Value) -> Result<RuleSpec> {
        Ok(RuleSpec {
            table: v["table"].as_u64().unwrap_or(0) as u32,
            prio: u8::try_from(v["prio"].as_u64().unwrap_or(0)).context("priority")?,
            matches: v["match"].as_str().ok_or_else(|| anyhow!("add wants a match"))?.to_string(),
            action: Action::from_json(&v["action"])?,
        })
    }
}

/// A connection to a `flow serve`.
pub struct Client {
    r: BufReader<UnixStream>,
    w: UnixStream,
}

impl Client {
    pub fn connect(path: &Path) -> Result<Client> {
        let w = UnixStream::connect(path).with_context(|| {
            format!("connect to {} (is `doorbell flow serve` running? --socket / DOORBELL_FLOW_SOCK)", path.display())
        })?;
        Ok(Client { r: BufReader::new(w.try_clone()?), w })
    }

    /// Sends a request; an `ok: false` answer is an error with the server's message.
    pub fn call(&mut self, req: &Value) -> Result<Value> {
        writeln!(self.w, "{req}")?;
        let mut line = String::new();
        if self.r.read_line(&mut line)? == 0 {
            bail!("the server closed the connection");
        }
        let v: Value = serde_json::from_str(&line).context("bad answer")?;
        if v["ok"].as_bool() != Some(true) {
            bail!("{}", v["error"].as_str().unwrap_or("refused"));
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_round_trips_through_json() {
        for to in [To::Qp(3), To::Drop, To::Pass, To::Table(2)] {
            let s = RuleSpec { table: 1, prio: 7, matches: "udp.dport=1".into(), action: Action { to, count: true, tag: 9 } };
            assert_eq!(RuleSpec::from_json(&s.to_json()).unwrap(), s);
        }
        assert!(Action::from_json(&json!({"to": "nowhere"})).is_err());
    }
}
