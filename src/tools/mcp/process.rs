//! A stdio server's process: its own process group, killed whole; its stderr into the log.

use super::*;

/// The stdio server's command, started as the leader of its own process
/// group: what it starts (`npx` starting `node`, a shell's children) is in
/// the group too, and the whole group is killed when the transport goes.
#[cfg(unix)]
pub(super) fn in_own_group(cmd: tokio::process::Command) -> process_wrap::tokio::CommandWrap {
    let mut cmd = process_wrap::tokio::CommandWrap::from(cmd);
    cmd.wrap(process_wrap::tokio::ProcessGroup::leader())
        .wrap(KillGroupOnDrop);
    cmd
}

#[cfg(not(unix))]
pub(super) fn in_own_group(cmd: tokio::process::Command) -> process_wrap::tokio::CommandWrap {
    cmd.into()
}

/// Kills the process group (see [`in_own_group`]) when the child is
/// dropped, whether or not its leader has exited: a leader that exits on
/// end of input may leave children behind. Synchronous (one `killpg`), so
/// it holds when the runtime itself is going away.
#[cfg(unix)]
#[derive(Debug)]
pub(super) struct KillGroupOnDrop;

#[cfg(unix)]
impl process_wrap::tokio::CommandWrapper for KillGroupOnDrop {
    fn wrap_child(
        &mut self,
        inner: Box<dyn process_wrap::tokio::ChildWrapper>,
        _core: &process_wrap::tokio::CommandWrap,
    ) -> std::io::Result<Box<dyn process_wrap::tokio::ChildWrapper>> {
        Ok(Box::new(GroupChild(Some(inner))))
    }
}

/// `None` only on the way out of [`ChildWrapper::into_inner`], where
/// nothing can look at it.
///
/// [`ChildWrapper::into_inner`]: process_wrap::tokio::ChildWrapper::into_inner
#[cfg(unix)]
#[derive(Debug)]
pub(super) struct GroupChild(Option<Box<dyn process_wrap::tokio::ChildWrapper>>);

#[cfg(unix)]
impl process_wrap::tokio::ChildWrapper for GroupChild {
    fn inner(&self) -> &dyn process_wrap::tokio::ChildWrapper {
        self.0.as_deref().unwrap_or(self)
    }
    fn inner_mut(&mut self) -> &mut dyn process_wrap::tokio::ChildWrapper {
        match self.0 {
            Some(ref mut child) => child.as_mut(),
            None => self,
        }
    }
    fn into_inner(mut self: Box<Self>) -> Box<dyn process_wrap::tokio::ChildWrapper> {
        // Whoever takes the child takes the duty to end its group.
        match self.0.take() {
            Some(child) => child,
            None => self,
        }
    }
}

#[cfg(unix)]
impl Drop for GroupChild {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            // SIGKILL to the whole group (the process-group child's `start_kill`).
            let _ = child.start_kill();
        }
    }
}

/// The server's stderr, line by line, into the log: control characters
/// escaped, at most [`STDERR_LINES_PER_SEC`] lines a second.
pub(super) async fn log_stderr(server: String, mut stderr: tokio::process::ChildStderr) {
    let mut line = Vec::new();
    let mut chunk = [0u8; 1024];
    let mut limit = LineLimit::new(tokio::time::Instant::now().into_std());
    let mut emit = |line: &[u8]| {
        let (dropped, admitted) = limit.admit(std::time::Instant::now());
        if let Some(n) = dropped {
            tracing::warn!(server = %server, "stderr: {n} lines not logged (more than {STDERR_LINES_PER_SEC} a second)");
        }
        if admitted {
            tracing::info!(server = %server, "stderr: {}", printable(line));
        }
    };
    loop {
        let n = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &byte in chunk.iter().take(n) {
            if byte == b'\n' {
                emit(&line);
                line.clear();
            } else if line.len() < MAX_STDERR_LINE {
                line.push(byte);
            }
        }
    }
    if !line.is_empty() {
        emit(&line);
    }
    if let Some(n) = limit.flush() {
        tracing::warn!(server = %server, "stderr: {n} lines not logged (more than {STDERR_LINES_PER_SEC} a second)");
    }
}

/// A line of a server as a log line: lossy UTF-8, control characters (ANSI
/// escapes, carriage returns) and bidirectional overrides escaped.
pub(super) fn printable(line: &[u8]) -> String {
    let mut out = String::with_capacity(line.len());
    for c in String::from_utf8_lossy(line).chars() {
        let bidi = matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
        if (c.is_control() && c != '\t') || bidi {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// At most [`STDERR_LINES_PER_SEC`] lines per one-second window; the
/// lines over are counted and reported when the next window starts.
pub(super) struct LineLimit {
    window: std::time::Instant,
    in_window: u32,
    dropped: u64,
}

impl LineLimit {
    pub(super) fn new(now: std::time::Instant) -> Self {
        Self {
            window: now,
            in_window: 0,
            dropped: 0,
        }
    }

    /// Lines dropped in the windows before (to report), and whether this line is logged.
    pub(super) fn admit(&mut self, now: std::time::Instant) -> (Option<u64>, bool) {
        let mut report = None;
        if now.saturating_duration_since(self.window) >= Duration::from_secs(1) {
            self.window = now;
            self.in_window = 0;
            report = self.flush();
        }
        if self.in_window < STDERR_LINES_PER_SEC {
            self.in_window += 1;
            (report, true)
        } else {
            self.dropped += 1;
            (report, false)
        }
    }

    pub(super) fn flush(&mut self) -> Option<u64> {
        Some(std::mem::take(&mut self.dropped)).filter(|&n| n > 0)
    }
}
