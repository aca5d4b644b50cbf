//! The kernel's socket tables: every TCP and UDP socket (IPv4 and IPv6) with its endpoints,
//! state, owning uid and inode, and which processes hold each inode open.
//!
//! Owns: reading `/proc/net/{tcp,tcp6,udp,udp6}` and `/proc/<pid>/fd`. Must never: judge what a
//! socket means (a dev server, exposure, protection: that is holdmap's), resolve names (no DNS),
//! or fail because one table is missing (IPv6 off) — only when none can be read.
//!
//! Addresses are reported as the kernel stores them: an IPv4 peer of an IPv6 socket stays an
//! IPv4-mapped IPv6 address (`::ffff:127.0.0.1`); unmapping is the reader's choice.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};

/// A socket's transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Protocol {
    Tcp,
    Udp,
}

impl Protocol {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }
}

/// A socket's state as the kernel reports it (`st` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum SocketState {
    /// TCP LISTEN (0x0A).
    Listen,
    /// TCP ESTABLISHED (0x01).
    Established,
    /// TCP TIME_WAIT (0x06): no owner any more (inode 0).
    TimeWait,
    /// A UDP socket bound but not connected (0x07): UDP's "listening".
    Bound,
    /// Any other state, by its kernel number.
    Other(u8),
}

impl SocketState {
    /// The state of a row of a `protocol` table whose `st` column is `st`. The kernel reuses
    /// TCP's numbers for UDP: an unconnected UDP socket is TCP_CLOSE (7), a connected one
    /// TCP_ESTABLISHED (1).
    fn from_kernel(st: u8, protocol: Protocol) -> SocketState {
        match (protocol, st) {
            (Protocol::Tcp, 0x0A) => SocketState::Listen,
            (_, 0x01) => SocketState::Established,
            (Protocol::Tcp, 0x06) => SocketState::TimeWait,
            (Protocol::Udp, 0x07) => SocketState::Bound,
            (_, other) => SocketState::Other(other),
        }
    }
}

/// One row of a socket table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SocketRow {
    pub(crate) protocol: Protocol,
    pub(crate) local: SocketAddr,
    pub(crate) remote: SocketAddr,
    pub(crate) state: SocketState,
    /// The uid that owns the socket (column 8).
    pub(crate) uid: u32,
    /// The socket's inode (column 10); 0 when no process holds it (TIME_WAIT).
    pub(crate) inode: u64,
}

impl SocketRow {
    /// Whether the socket accepts new peers: TCP in LISTEN, or UDP bound and unconnected.
    pub(crate) fn is_listening(&self) -> bool {
        matches!(
            (self.protocol, self.state),
            (Protocol::Tcp, SocketState::Listen) | (Protocol::Udp, SocketState::Bound)
        )
    }
}

/// The four tables, each with the protocol of its rows.
const TABLES: [(&str, Protocol); 4] = [
    ("/proc/self/net/tcp", Protocol::Tcp),
    ("/proc/self/net/tcp6", Protocol::Tcp),
    ("/proc/self/net/udp", Protocol::Udp),
    ("/proc/self/net/udp6", Protocol::Udp),
];

/// What one read of the tables found: the rows, and in words each table that could not be read
/// whole.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tables {
    pub(crate) rows: Vec<SocketRow>,
    /// One sentence per table that could not be read or was cut at its bound (an IPv6 table
    /// that does not exist because IPv6 is off is not a problem: no socket is missing).
    pub(crate) problems: Vec<String>,
}

/// Every row of the four tables. An error only when none of them could be read.
#[cfg(test)]
pub(crate) fn read_all() -> std::io::Result<Vec<SocketRow>> {
    read_tables().map(|t| t.rows)
}

/// Every row of the four tables, with what could not be read. An error only when none of them
/// could be read.
#[cfg(target_os = "linux")]
pub(crate) fn read_tables() -> std::io::Result<Tables> {
    use std::io::Read as _;
    let limit = crate::limits::HOLDMAP_SOCKET_TABLE_BYTES_MAX;
    let mut out = Tables::default();
    let mut read_any = false;
    let mut buf = Vec::new();
    for (path, protocol) in TABLES {
        buf.clear();
        let shown = path.replace("/self", "");
        let read = std::fs::File::open(path).and_then(|f| f.take(limit).read_to_end(&mut buf));
        match read {
            Ok(n) => {
                read_any = true;
                let cut = u64::try_from(n).unwrap_or(u64::MAX) >= limit;
                if cut {
                    out.problems.push(format!(
                        "{shown} is larger than {} MiB; the sockets past that are not listed",
                        limit / (1024 * 1024)
                    ));
                }
                let text = String::from_utf8_lossy(whole_lines(&buf, cut));
                out.rows.extend(parse_table(&text, protocol));
            }
            // IPv6 turned off: there are no IPv6 sockets, so nothing is missing from the list
            // and there is nothing to warn about.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && path.ends_with('6') => {}
            Err(e) => out.problems.push(format!(
                "{shown} could not be read ({e}), so its sockets are not listed"
            )),
        }
    }
    if !read_any {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "/proc/net is not available",
        ));
    }
    Ok(out)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn read_tables() -> std::io::Result<Tables> {
    Err(crate::os::unsupported("reading the socket tables"))
}

/// The bytes of a table up to its last newline when the read was `cut` at its bound: a row cut
/// in the middle could parse as a wrong inode or port.
fn whole_lines(buf: &[u8], cut: bool) -> &[u8] {
    if !cut {
        return buf;
    }
    let end = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    buf.get(..end).unwrap_or_default()
}

/// The rows of one table's text (`/proc/net/tcp6` etc.): the header skipped, unreadable rows
/// skipped. Pure, for tests.
pub(crate) fn parse_table(text: &str, protocol: Protocol) -> Vec<SocketRow> {
    text.lines()
        .skip(1)
        .filter_map(|line| parse_row(line, protocol))
        .collect()
}

/// One row: `sl local rem st tx:rx tr:when retrnsmt uid timeout inode …`.
fn parse_row(line: &str, protocol: Protocol) -> Option<SocketRow> {
    let mut cols = line.split_ascii_whitespace();
    let slot = cols.next()?;
    if !slot.ends_with(':') {
        return None;
    }
    let local = parse_endpoint(cols.next()?)?;
    let remote = parse_endpoint(cols.next()?)?;
    let st = u8::try_from(parse_hex(cols.next()?, 2)?).ok()?;
    // tx_queue:rx_queue, tr:tm->when, retrnsmt
    let mut cols = cols.skip(3);
    let uid = cols.next()?.parse::<u32>().ok()?;
    let _timeout = cols.next()?;
    let inode = cols.next()?.parse::<u64>().ok()?;
    Some(SocketRow {
        protocol,
        local,
        remote,
        state: SocketState::from_kernel(st, protocol),
        uid,
        inode,
    })
}

/// `ADDR:PORT` in the kernel's hex: the address as 32-bit words in host byte order (one for
/// IPv4, four for IPv6), the port as a plain big-number hex.
fn parse_endpoint(text: &str) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    let port = u16::try_from(parse_hex(port, 4)?).ok()?;
    match addr.len() {
        8 => {
            let word = parse_hex(addr, 8)?;
            Some(SocketAddr::from((Ipv4Addr::from(word.to_ne_bytes()), port)))
        }
        32 => {
            let mut bytes = [0u8; 16];
            for (chunk, out) in addr.as_bytes().chunks(8).zip(bytes.chunks_mut(4)) {
                let word = parse_hex(std::str::from_utf8(chunk).ok()?, 8)?;
                out.copy_from_slice(&word.to_ne_bytes());
            }
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(bytes),
                port,
                0,
                0,
            )))
        }
        _ => None,
    }
}

/// Exactly `digits` hex digits (at most 8), nothing else: `from_str_radix` alone would also
/// take a sign.
fn parse_hex(hex: &str, digits: usize) -> Option<u32> {
    if hex.len() != digits || digits > 8 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(hex, 16).ok()
}

/// Which processes hold which socket inodes open.
#[derive(Debug, Clone, Default)]
pub(crate) struct Owners {
    /// Socket inode → the pids that hold it (sorted, unique).
    pub(crate) by_inode: HashMap<u64, Vec<i32>>,
    /// How many of the given processes' fd tables could not be read (other accounts' processes
    /// without privilege, or processes that exited meanwhile).
    pub(crate) unreadable: usize,
    /// Those processes, in the order given.
    pub(crate) unreadable_pids: Vec<i32>,
}

/// Walks the fd tables of `pids` (`/proc/<pid>/fd/*` → `socket:[inode]`).
#[cfg(target_os = "linux")]
pub(crate) fn owners(pids: &[i32]) -> Owners {
    use std::fmt::Write as _;
    let mut out = Owners::default();
    let mut dir = String::new();
    for &pid in pids {
        dir.clear();
        let _ = write!(dir, "/proc/{pid}/fd");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            out.unreadable += 1;
            out.unreadable_pids.push(pid);
            continue;
        };
        for entry in entries
            .take(crate::limits::HOLDMAP_FDS_PER_PROCESS_MAX)
            .flatten()
        {
            // A descriptor closed since the listing has no link: it held nothing worth naming.
            let Ok(target) = std::fs::read_link(entry.path()) else {
                continue;
            };
            if let Some(inode) = socket_inode(target.as_os_str().as_encoded_bytes()) {
                let holders = out.by_inode.entry(inode).or_default();
                // The walk goes one process at a time, so a process that holds a socket twice
                // (a dup) finds itself last.
                if holders.last() != Some(&pid) {
                    holders.push(pid);
                }
            }
        }
    }
    for holders in out.by_inode.values_mut() {
        holders.sort_unstable();
        holders.dedup();
    }
    out
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn owners(_pids: &[i32]) -> Owners {
    Owners::default()
}

/// The inode of a `socket:[12345]` link target.
fn socket_inode(target: &[u8]) -> Option<u64> {
    let digits = target.strip_prefix(b"socket:[")?.strip_suffix(b"]")?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 41234 1 0000000000000000 100 0 0 10 0\n\
   1: 0100007F:0BB8 0100007F:D2F0 06 00000000:00000000 03:00000CB4 00000000     0        0 0 3 0000000000000000\n\
   2: garbage row that is not a socket\n\
   3: 0100007F:XYZW 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 9\n\
   4: 0A00A8C0:0016 0100A8C0:C350 01 00000000:00000000 02:000A7E2B 00000000     0        0 555 4 0000000000000000 20 4 30 10 -1\n";

    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 777 1 0000000000000000 100 0 0 10 0\n\
   1: 0000000000000000FFFF00000100007F:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 778 1 0000000000000000 100 0 0 10 0\n\
   2: B80D0120000000000000000001000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  0        0 779 1 0000000000000000 100 0 0 10 0\n";

    const UDP: &str = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
  123: 00000000:14E9 00000000:0000 07 00000000:00000000 00:00000000 00000000   101        0 2222 2 0000000000000000 0\n";

    #[test]
    #[cfg(target_endian = "little")]
    fn ipv4_rows_are_decoded_and_a_malformed_row_is_skipped() {
        let rows = parse_table(TCP, Protocol::Tcp);
        assert_eq!(rows.len(), 3, "{rows:?}");
        let listen = &rows[0];
        assert_eq!(listen.local, "127.0.0.1:3000".parse().unwrap());
        assert_eq!(listen.remote, "0.0.0.0:0".parse().unwrap());
        assert_eq!(listen.state, SocketState::Listen);
        assert_eq!((listen.uid, listen.inode), (1000, 41234));
        let wait = &rows[1];
        assert_eq!(wait.state, SocketState::TimeWait);
        assert_eq!(wait.inode, 0);
        assert_eq!(wait.remote, "127.0.0.1:54000".parse().unwrap());
        let ssh = &rows[2];
        assert_eq!(ssh.local, "192.168.0.10:22".parse().unwrap());
        assert_eq!(ssh.remote, "192.168.0.1:50000".parse().unwrap());
        assert_eq!(ssh.state, SocketState::Established);
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn ipv6_rows_are_decoded_with_each_word_in_host_order_and_v4_mapped_kept_mapped() {
        let rows = parse_table(TCP6, Protocol::Tcp);
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert_eq!(rows[0].local, "[::1]:8080".parse().unwrap());
        assert_eq!(rows[0].inode, 777);
        assert_eq!(rows[1].local, "[::ffff:127.0.0.1]:8081".parse().unwrap());
        assert_eq!(rows[2].local, "[2001:db8::1]:80".parse().unwrap());
        assert_eq!(rows[2].uid, 0);
    }

    #[test]
    fn an_unconnected_udp_socket_is_bound() {
        let rows = parse_table(UDP, Protocol::Udp);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].state, SocketState::Bound);
        assert_eq!(rows[0].local.port(), 5353);
        assert_eq!(rows[0].protocol, Protocol::Udp);
        assert_eq!((rows[0].uid, rows[0].inode), (101, 2222));
    }

    #[test]
    fn hostile_endpoints_are_refused() {
        for bad in [
            "",
            "0100007F",
            "0100007F:",
            "0100007F:50",
            "+100007F:0050",
            "0100007F:+050",
            "0100007F0:0050",
            "GGGGGGGG:0050",
            "0100007F:0G50",
            "0000000000000000000000000100000:0050",
        ] {
            assert_eq!(parse_endpoint(bad), None, "{bad:?}");
        }
        assert_eq!(parse_table("", Protocol::Tcp), Vec::new());
        assert_eq!(parse_table("header only\n", Protocol::Udp), Vec::new());
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn a_table_cut_at_its_bound_loses_the_cut_row_not_its_inode() {
        let whole = TCP.as_bytes();
        // Cut inside row 0's inode (41234 → 412).
        let at = TCP.find("41234").unwrap() + 3;
        let cut = whole_lines(&whole[..at], true);
        assert!(parse_table(std::str::from_utf8(cut).unwrap(), Protocol::Tcp).is_empty());
        let at = TCP.find("1: 0100007F:0BB8 0100007F").unwrap() + 10;
        let cut = whole_lines(&whole[..at], true);
        let rows = parse_table(std::str::from_utf8(cut).unwrap(), Protocol::Tcp);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].inode, 41234);
        assert_eq!(whole_lines(whole, false), whole);
    }

    #[test]
    fn only_socket_links_name_an_inode() {
        assert_eq!(socket_inode(b"socket:[12345]"), Some(12345));
        assert_eq!(socket_inode(b"pipe:[12345]"), None);
        assert_eq!(socket_inode(b"socket:[]"), None);
        assert_eq!(socket_inode(b"socket:[12a]"), None);
        assert_eq!(socket_inode(b"/tmp/socket:[1]"), None);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_listener_and_a_udp_socket_we_bound_are_found_and_owned_by_us() {
        use std::os::unix::fs::MetadataExt as _;
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tcp_at = tcp.local_addr().unwrap();
        let udp_at = udp.local_addr().unwrap();
        let rows = read_all().unwrap();
        let listener = rows
            .iter()
            .find(|r| r.protocol == Protocol::Tcp && r.local == tcp_at)
            .unwrap_or_else(|| panic!("no row for {tcp_at}"));
        assert_eq!(listener.state, SocketState::Listen);
        let bound = rows
            .iter()
            .find(|r| r.protocol == Protocol::Udp && r.local == udp_at)
            .unwrap_or_else(|| panic!("no row for {udp_at}"));
        assert_eq!(bound.state, SocketState::Bound);
        assert_eq!(listener.uid, crate::os::process::euid());

        let me = std::process::id() as i32;
        let owners = owners(&[me]);
        assert_eq!(owners.unreadable, 0);
        assert_eq!(owners.by_inode.get(&listener.inode), Some(&vec![me]));
        assert_eq!(owners.by_inode.get(&bound.inode), Some(&vec![me]));
        // The inode in the table is the one our descriptor names.
        let fd = std::os::fd::AsRawFd::as_raw_fd(&tcp);
        let ino = std::fs::metadata(format!("/proc/self/fd/{fd}"))
            .unwrap()
            .ino();
        assert_eq!(ino, listener.inode);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_process_that_does_not_exist_is_counted_as_unreadable() {
        let owners = owners(&[i32::MAX]);
        assert_eq!(owners.unreadable, 1);
        assert_eq!(owners.unreadable_pids, vec![i32::MAX]);
        assert!(owners.by_inode.is_empty());
    }
}
