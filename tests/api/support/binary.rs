//! The real `agon serve` as a child process: built with its arguments and
//! a cleared environment, started once its API port accepts connections,
//! and stopped by SIGTERM.

use std::ffi::OsString;
use std::process::{ExitStatus, Output, Stdio};
use std::time::Duration;

use super::{free_port, listening};

/// `agon serve` on a free API port and a free WebSocket port, with only the
/// environment given here.
pub struct Serve {
    port: u16,
    ws_port: u16,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    stdout: Option<Stdio>,
    stderr: Option<Stdio>,
}

impl Serve {
    pub fn on_free_ports() -> Self {
        let port = free_port();
        let ws_port = free_port();
        Self {
            port,
            ws_port,
            args: ["serve", "--api-port", &port.to_string()]
                .into_iter()
                .chain(["--ws-port", &ws_port.to_string()])
                .map(OsString::from)
                .collect(),
            envs: Vec::new(),
            stdout: None,
            stderr: None,
        }
    }

    /// `http://127.0.0.1:<port>`, known before the start (for settings that
    /// name the service's own address).
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Binds `--host 127.0.0.1` explicitly.
    pub fn loopback(mut self) -> Self {
        self.args
            .extend(["--host", "127.0.0.1"].map(OsString::from));
        self
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.envs.push((key.into(), value.into()));
        self
    }

    pub fn envs<K: Into<OsString>, V: Into<OsString>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.envs
            .extend(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// `SERVICE_DATA_DIR`.
    pub fn data_dir(self, dir: &std::path::Path) -> Self {
        self.env("SERVICE_DATA_DIR", dir)
    }

    pub fn stdout(mut self, stdout: Stdio) -> Self {
        self.stdout = Some(stdout);
        self
    }

    pub fn stderr(mut self, stderr: Stdio) -> Self {
        self.stderr = Some(stderr);
        self
    }

    /// Spawns the binary and waits until its API port accepts connections;
    /// it is killed when dropped.
    pub async fn start(self) -> Served {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agon"));
        command
            .args(&self.args)
            .env_clear()
            // Demo agents answer at once unless a test watches them write.
            .env("SERVICE_DEMO_DELTA_DELAY_MS", "0")
            .envs(self.envs)
            .kill_on_drop(true);
        if let Some(stdout) = self.stdout {
            command.stdout(stdout);
        }
        if let Some(stderr) = self.stderr {
            command.stderr(stderr);
        }
        let mut child = command.spawn().unwrap();
        listening(self.port, || {
            child.try_wait().unwrap().map(|status| status.to_string())
        })
        .await;
        Served {
            port: self.port,
            ws_port: self.ws_port,
            base: format!("http://127.0.0.1:{}", self.port),
            child,
        }
    }
}

/// A running `agon serve`.
pub struct Served {
    pub port: u16,
    /// `--ws-port`.
    pub ws_port: u16,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    pub child: tokio::process::Child,
}

impl Served {
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap()
    }

    fn sigterm(&self) {
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    /// SIGKILL, and reap it.
    pub async fn kill_hard(&mut self) {
        self.child.kill().await.unwrap();
    }

    /// SIGTERM; returns how it exited (at most `limit` later).
    pub async fn terminate(&mut self, limit: Duration) -> ExitStatus {
        self.sigterm();
        tokio::time::timeout(limit, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("the binary did not exit within {limit:?} of SIGTERM"))
            .unwrap()
    }

    /// SIGTERM; returns its exit and what it wrote to piped outputs (at
    /// most `limit` later).
    pub async fn stop(self, limit: Duration) -> Output {
        self.sigterm();
        tokio::time::timeout(limit, self.child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("the binary did not exit within {limit:?} of SIGTERM"))
            .unwrap()
    }
}
