//! A headless Chromium driven over the DevTools protocol, for the tests
//! that load irqlab's pages in a real browser (the survey's pages, `lab
//! compare`'s, `watch --html`'s). A dev-dependency only.
//!
//! How: Chromium is driven over the DevTools protocol on a pipe
//! (`--remote-debugging-pipe`: NUL-terminated JSON, commands read from fd
//! 3, replies and events written to fd 4; a `sh -c 'exec ... 3<&0 4>&1'`
//! wrapper puts them on the child's stdin and stdout), so no port, no
//! WebSocket client, no extra crate. Errors are every `Log.entryAdded` of
//! level error (failed loads, Content-Security-Policy refusals: the page's
//! policy forbids anything not inline, so a stray outside resource is an
//! error, not a silent fetch), every `Runtime.consoleAPICalled` of type
//! error or assert, and every `Runtime.exceptionThrown`. The page has no
//! script, so the test shows the check bites: the same page with one
//! outside stylesheet and one image added must report errors.

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long one protocol call may take (Chromium's start included).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// A headless Chromium on a DevTools pipe; killed when dropped.
pub struct Browser {
    child: Child,
    commands: ChildStdin,
    messages: Receiver<Value>,
    /// Events seen while waiting for replies, in order.
    events: Vec<Value>,
    next_id: u64,
    session: Option<String>,
    /// Chromium's stderr, shown when it dies.
    log: PathBuf,
}

impl Browser {
    pub fn start(profile: &Path, log: &Path) -> Browser {
        let found = Command::new("chromium").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
        assert!(found.is_ok_and(|s| s.success()), "no chromium on PATH (scripts/install-deps.sh installs the Debian package)");
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-extensions",
            "--no-first-run",
            "--no-default-browser-check",
            "--remote-debugging-pipe",
            "--window-size=1280,900",
        ];
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 </dev/null >&2"#)
            .arg("chromium")
            .args(args)
            .arg(format!("--user-data-dir={}", profile.display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("start chromium (scripts/install-deps.sh installs it)");
        let commands = child.stdin.take().unwrap();
        let mut replies = child.stdout.take().unwrap();
        let (tx, messages) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buffer = Vec::new();
            let mut chunk = [0u8; 65536];
            while let Ok(n @ 1..) = replies.read(&mut chunk) {
                buffer.extend_from_slice(&chunk[..n]);
                while let Some(end) = buffer.iter().position(|&b| b == 0) {
                    let message: Vec<u8> = buffer.drain(..=end).collect();
                    if tx.send(serde_json::from_slice(&message[..end]).expect("DevTools sends JSON")).is_err() {
                        return;
                    }
                }
            }
        });
        Browser { child, commands, messages, events: Vec::new(), next_id: 1, session: None, log: log.to_path_buf() }
    }

    /// Sends one command (to the attached page, once there is one) and
    /// waits for its result.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut command = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = &self.session {
            command["sessionId"] = json!(session);
        }
        let mut bytes = serde_json::to_vec(&command).unwrap();
        bytes.push(0);
        self.commands.write_all(&bytes).unwrap();
        let deadline = Instant::now() + CALL_TIMEOUT;
        loop {
            let message = self.next_message(deadline, method);
            if message["id"] == json!(id) {
                assert!(message.get("error").is_none(), "{method}: {}", message["error"]);
                return message["result"].clone();
            }
            self.events.push(message);
        }
    }

    fn next_message(&mut self, deadline: Instant, waiting_for: &str) -> Value {
        match self.messages.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(message) => message,
            Err(RecvTimeoutError::Timeout) => panic!("chromium: no answer to {waiting_for} in {CALL_TIMEOUT:?}"),
            Err(RecvTimeoutError::Disconnected) => {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                panic!("chromium exited while waiting for {waiting_for}; its log:\n{log}")
            }
        }
    }

    /// Opens a page target and attaches to it; later calls go to it.
    pub fn open_page(&mut self) {
        let target = self.call("Target.createTarget", json!({ "url": "about:blank" }));
        let attached = self.call("Target.attachToTarget", json!({ "targetId": target["targetId"], "flatten": true }));
        self.session = Some(attached["sessionId"].as_str().unwrap().to_string());
        for domain in ["Runtime.enable", "Log.enable", "Page.enable", "Network.enable"] {
            self.call(domain, json!({}));
        }
    }

    /// Loads `url` and waits for its load event; returns what went wrong
    /// while it loaded and every URL it requested.
    pub fn load(&mut self, url: &str) -> Loaded {
        self.events.clear();
        self.call("Page.navigate", json!({ "url": url }));
        let deadline = Instant::now() + CALL_TIMEOUT;
        while !self.events.iter().any(|e| e["method"] == "Page.loadEventFired") {
            let message = self.next_message(deadline, "Page.loadEventFired");
            self.events.push(message);
        }
        // One more round trip: whatever the page logged is in by its reply.
        self.call("Runtime.evaluate", json!({ "expression": "0" }));
        Loaded {
            errors: self.events.iter().filter_map(console_error).collect(),
            requests: self
                .events
                .iter()
                .filter(|e| e["method"] == "Network.requestWillBeSent")
                .map(|e| e["params"]["request"]["url"].as_str().unwrap_or_default().to_string())
                .collect(),
        }
    }

    /// Evaluates `expression` in the page; its value must be JSON text.
    pub fn evaluate_json(&mut self, expression: &str) -> Value {
        let result = self.call("Runtime.evaluate", json!({ "expression": expression, "returnByValue": true }));
        assert!(result.get("exceptionDetails").is_none(), "{expression}: {}", result["exceptionDetails"]);
        serde_json::from_str(result["result"]["value"].as_str().expect("a string")).unwrap()
    }

    /// A PNG of the whole page, not only the window.
    pub fn screenshot(&mut self) -> Vec<u8> {
        let metrics = self.call("Page.getLayoutMetrics", json!({}));
        let size = &metrics["cssContentSize"];
        let clip = json!({ "x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1 });
        let shot = self.call("Page.captureScreenshot", json!({ "format": "png", "captureBeyondViewport": true, "clip": clip }));
        base64_decode(shot["data"].as_str().unwrap())
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What loading a page brought: the console errors, and every URL fetched.
pub struct Loaded {
    pub errors: Vec<String>,
    pub requests: Vec<String>,
}

/// The error an event reports, if it is one.
pub fn console_error(event: &Value) -> Option<String> {
    let p = &event["params"];
    match event["method"].as_str()? {
        "Log.entryAdded" if p["entry"]["level"] == "error" => Some(format!("log: {} ({})", p["entry"]["text"], p["entry"]["url"])),
        "Runtime.consoleAPICalled" if matches!(p["type"].as_str(), Some("error" | "assert")) => {
            Some(format!("console.{}: {}", p["type"], p["args"]))
        }
        "Runtime.exceptionThrown" => Some(format!("exception: {}", p["exceptionDetails"])),
        _ => None,
    }
}

/// What the test asks of the rendered DOM, as JSON.
pub const INSPECT: &str = r#"JSON.stringify((() => {
  const sections = [...document.querySelectorAll('section')];
  const heading = s => (s.querySelector('h2') || {}).textContent;
  const bodyText = s => { const c = s.cloneNode(true); c.querySelectorAll('h2, svg').forEach(e => e.remove()); return c.textContent.trim(); };
  return {
    title: document.title,
    verdict: (document.querySelector('.callout') || {}).textContent,
    svgs: document.querySelectorAll('svg').length,
    scripts: document.querySelectorAll('script').length,
    sections: sections.map(heading),
    empty: sections.filter(s => bodyText(s) === '').map(heading),
    plotted: [...document.querySelectorAll('svg')].filter(s => s.getBoundingClientRect().width > 100).length,
  };
})())"#;

/// A big-endian u32 (a PNG header's width and height).
pub fn be32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes(bytes.try_into().unwrap())
}

/// Standard base64 (the protocol's encoding of binary data).
pub fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let digits: Vec<u8> = text.bytes().filter(|&c| c != b'=').map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let bits = chunk.iter().enumerate().fold(0u32, |acc, (i, &d)| acc | u32::from(d) << (18 - 6 * i));
        out.extend(bits.to_be_bytes()[1..chunk.len()].iter());
    }
    out
}

#[cfg(test)]
#[test]
fn base64_decodes() {
    assert_eq!(base64_decode("aXJxbGFi"), b"irqlab");
    assert_eq!(base64_decode("aXJxbA=="), b"irql");
    assert_eq!(base64_decode("aXJxbGE="), b"irqla");
}
