//! The secret prompt of `holdcall connector set`: one line from stdin, or typed at a terminal with
//! echo off. Must never echo, log or keep more than one byte past the limit of what is typed.

use std::io::Write;

use super::CliError;
use crate::limits;

/// The secret: one line from stdin when it is not a terminal, else typed at a `Secret: ` prompt
/// (on stderr) with echo turned off. The newline is not part of it.
pub(super) fn read_secret() -> Result<crate::vault::Secret, CliError> {
    use std::io::{BufRead, IsTerminal, Read};
    let stdin = std::io::stdin();
    let mut line = Vec::new();
    if stdin.is_terminal() {
        // Echo, line editing and signals go off before the prompt appears, so nothing typed
        // after it is ever shown; the line is read byte by byte here (no 4095-byte canonical
        // line limit), and Ctrl-C is a byte that ends the prompt with the terminal restored.
        let _quiet = EchoOff::new(&stdin)?;
        eprint!("Secret: ");
        std::io::stderr().flush()?;
        let typed = read_typed_line(&mut stdin.lock())?;
        eprintln!();
        line = typed.ok_or_else(|| {
            CliError::Refused("interrupted at the prompt; nothing was stored".into())
        })?;
    } else {
        // One byte past the limit (and its line break) is enough to know it is too long.
        stdin
            .lock()
            .take(limits::SECRET_BYTES_MAX as u64 + 3)
            .read_until(b'\n', &mut line)?;
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
    }
    let text = String::from_utf8(line).map_err(|_| {
        crate::connector::ConnectorError::Secret("the secret is not UTF-8 text".into())
    })?;
    crate::connector::validate_secret(&text)?;
    Ok(crate::vault::Secret::new(text))
}

/// One line typed at a terminal in non-canonical mode: Enter ends it, Backspace removes the
/// last character, Ctrl-U clears it, Ctrl-C or Ctrl-D (or the end of input) abandon it (None).
/// At most one byte past `limits::SECRET_BYTES_MAX` is kept, so an over-long secret is refused
/// rather than cut.
fn read_typed_line(input: &mut impl std::io::Read) -> std::io::Result<Option<Vec<u8>>> {
    let mut line: Vec<u8> = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        if input.read(&mut byte)? == 0 {
            return Ok(None);
        }
        match byte {
            [b'\r' | b'\n'] => return Ok(Some(line)),
            [0x03 | 0x04] => return Ok(None),
            [0x15] => line.clear(),
            [0x7f | 0x08] => {
                // Remove one whole UTF-8 character.
                while let Some(b) = line.pop() {
                    if b & 0xC0 != 0x80 {
                        break;
                    }
                }
            }
            [b] => {
                if line.len() <= limits::SECRET_BYTES_MAX {
                    line.push(b);
                }
            }
        }
    }
}

/// Terminal echo turned off for as long as it lives (restored on drop, error or not).
struct EchoOff {
    fd: std::os::fd::OwnedFd,
    saved: nix::sys::termios::Termios,
}

impl EchoOff {
    fn new(stdin: &std::io::Stdin) -> Result<EchoOff, CliError> {
        use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
        use std::os::fd::AsFd;
        let fd = stdin.as_fd().try_clone_to_owned()?;
        let saved = tcgetattr(&fd).map_err(std::io::Error::from)?;
        let mut quiet = saved.clone();
        // No echo, no line discipline (the line is read byte by byte), no signals from keys:
        // Ctrl-C arrives as a byte, so the terminal is always put back by `Drop`.
        quiet
            .local_flags
            .remove(LocalFlags::ECHO | LocalFlags::ICANON | LocalFlags::ISIG);
        use nix::sys::termios::SpecialCharacterIndices::{VMIN, VTIME};
        for (index, value) in [(VMIN, 1), (VTIME, 0)] {
            if let Some(c) = quiet.control_chars.get_mut(index as usize) {
                *c = value;
            }
        }
        tcsetattr(&fd, SetArg::TCSAFLUSH, &quiet).map_err(std::io::Error::from)?;
        Ok(EchoOff { fd, saved })
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        let _ = nix::sys::termios::tcsetattr(
            &self.fd,
            nix::sys::termios::SetArg::TCSADRAIN,
            &self.saved,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typed_secret_ends_at_enter_edits_with_backspace_and_ctrl_c_abandons_it() {
        let read = |b: &[u8]| read_typed_line(&mut &b[..]).unwrap();
        assert_eq!(read(b"s3cret\r"), Some(b"s3cret".to_vec()));
        assert_eq!(read(b"s3crex\x7ft\n"), Some(b"s3cret".to_vec()));
        // Backspace removes a whole UTF-8 character.
        assert_eq!(read("caf\u{e9}\x7fe\r".as_bytes()), Some(b"cafe".to_vec()));
        assert_eq!(read(b"wrong\x15right\r"), Some(b"right".to_vec()));
        assert_eq!(read(b"half\x03"), None);
        assert_eq!(read(b"half\x04"), None);
        assert_eq!(read(b"no end"), None);
        // Longer than a terminal's canonical line (4095 bytes) is kept whole; past the limit
        // one byte is kept, so the secret is refused rather than cut.
        let long = vec![b'x'; 5000];
        assert_eq!(read(&[&long[..], b"\r"].concat()), Some(long));
        let over = vec![b'x'; limits::SECRET_BYTES_MAX + 10];
        assert_eq!(
            read(&[&over[..], b"\r"].concat()).map(|l| l.len()),
            Some(limits::SECRET_BYTES_MAX + 1)
        );
    }
}
