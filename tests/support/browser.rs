//! Headless Chromium (Debian's `chromium`, installed by `cargo xtask
//! deps`) driven over the DevTools protocol: open a page, read its DOM
//! with JavaScript, take a screenshot. The browser (its whole process
//! group) is killed and its profile directory removed on drop.

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tungstenite::{Message, WebSocket};

use super::TempDir;

pub const CHROMIUM: &str = "/usr/bin/chromium";

/// A running headless Chromium; killed on drop.
pub struct Chromium {
    child: Child,
    /// The DevTools port, on the loopback of `netns` (or of this host).
    port: u16,
    netns: Option<String>,
    // Dropped after the process is gone (Chromium writes into it).
    _profile: TempDir,
}

impl Chromium {
    /// Starts Chromium with an empty profile, in network namespace
    /// `netns` when given (its pages then reach that namespace's
    /// addresses).
    pub fn start(netns: Option<&str>) -> Chromium {
        assert!(
            Path::new(CHROMIUM).exists(),
            "{CHROMIUM} is installed by `cargo xtask deps` (Debian package chromium)"
        );
        let profile = TempDir::new("chromium");
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, CHROMIUM]);
                c
            }
            None => Command::new(CHROMIUM),
        };
        cmd.args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1280,1000",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
        ])
        .arg(format!("--user-data-dir={}", profile.0.display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // Its own process group: the drop ends the browser's helpers too.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd.spawn().expect("chromium starts");
        let mut browser = Chromium {
            child,
            port: 0,
            netns: netns.map(str::to_string),
            _profile: profile,
        };
        // Chromium writes the port it chose into the profile.
        let active = browser._profile.0.join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(60);
        browser.port = loop {
            let port = std::fs::read_to_string(&active)
                .ok()
                .and_then(|t| t.lines().next().and_then(|l| l.trim().parse().ok()));
            if let Some(p) = port {
                break p;
            }
            if let Ok(Some(status)) = browser.child.try_wait() {
                panic!("chromium exited at start: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "no DevToolsActivePort from chromium"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        browser
    }

    /// Runs `f` in the browser's network namespace (a socket stays in
    /// the namespace it was made in).
    fn near<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        match &self.netns {
            Some(ns) => in_netns(ns, f),
            None => f(),
        }
    }

    /// The browser's open tab.
    pub fn tab(&self) -> Tab {
        let port = self.port;
        let list: Value = self.near(move || {
            let text = ureq::get(&format!("http://127.0.0.1:{port}/json/list"))
                .timeout(Duration::from_secs(10))
                .call()
                .expect("DevTools /json/list")
                .into_string()
                .unwrap();
            serde_json::from_str(&text).expect("/json/list is JSON")
        });
        let url = list
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .and_then(|t| t["webSocketDebuggerUrl"].as_str())
            .expect("a page target")
            .to_string();
        let stream = self.near(move || {
            let s = TcpStream::connect(("127.0.0.1", port)).expect("DevTools port");
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            s
        });
        let (socket, _) = tungstenite::client(url.as_str(), stream).expect("DevTools WebSocket");
        Tab { socket, next_id: 1 }
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group this test started.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One tab, spoken to over the DevTools protocol.
pub struct Tab {
    socket: WebSocket<TcpStream>,
    next_id: u64,
}

impl Tab {
    /// Calls `method`; its result (events on the way are skipped).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"id": id, "method": method, "params": params});
        self.socket
            .send(Message::text(request.to_string()))
            .unwrap_or_else(|e| panic!("{method}: {e}"));
        loop {
            let msg = self
                .socket
                .read()
                .unwrap_or_else(|e| panic!("{method}: {e}"));
            let Message::Text(text) = msg else { continue };
            let v: Value = serde_json::from_str(text.as_str()).unwrap();
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// Evaluates `expression` in the page; its value (promises awaited).
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(
            r.get("exceptionDetails").is_none(),
            "{expression}: {}",
            r["exceptionDetails"]
        );
        r["result"]["value"].clone()
    }

    /// Opens `url` and waits until the page has loaded.
    pub fn navigate(&mut self, url: &str) {
        let r = self.call("Page.navigate", json!({ "url": url }));
        assert!(r.get("errorText").is_none(), "{url}: {r}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.eval("document.readyState") != "complete" {
            assert!(Instant::now() < deadline, "{url} did not load");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A PNG of the whole page (beyond the window's height), written to
    /// `path`.
    pub fn screenshot(&mut self, path: &Path) {
        let metrics = self.call("Page.getLayoutMetrics", json!({}));
        let size = &metrics["cssContentSize"];
        let (w, h) = (
            size["width"].as_f64().unwrap(),
            size["height"].as_f64().unwrap(),
        );
        let shot = self.call(
            "Page.captureScreenshot",
            json!({
                "format": "png",
                "captureBeyondViewport": true,
                "clip": {"x": 0, "y": 0, "width": w, "height": h, "scale": 1},
            }),
        );
        let png = data_encoding::BASE64
            .decode(shot["data"].as_str().expect("image data").as_bytes())
            .expect("base64");
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        std::fs::write(path, png).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

/// Runs `f` on a thread that has entered network namespace `ns`.
fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(&path).expect("netns file");
        // SAFETY: setns on this thread only, with a namespace fd we hold.
        let entered = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(entered, 0, "setns {path}");
        f()
    })
    .join()
    .expect("netns thread")
}
