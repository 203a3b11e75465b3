//! Many packets per system call, with the kernel's offloads.
//!
//! Outbound: one read from the TUN device returns a TSO super-packet (up to 64 KiB of one
//! TCP stream, with a virtio-net header); `tun-rs` splits it into MTU-sized segments with
//! their own headers and checksums. Each segment is sealed separately (WireGuard encrypts
//! packets, not streams) into one contiguous buffer, and runs of equal-sized datagrams to
//! one endpoint leave in one `sendmsg` with UDP GSO (`UDP_SEGMENT`), which the kernel cuts
//! into datagrams.
//!
//! Inbound: one `recvmmsg` returns several messages, each possibly a UDP GRO train of
//! equal-sized datagrams from one sender (`UDP_GRO`, cut at the message's stride). Every
//! datagram is opened into its own buffer behind room for a virtio-net header, and
//! `tun-rs` coalesces consecutive segments of one TCP (or UDP) flow back into large packets
//! (GRO) before writing them to the TUN device: one write per flow instead of one per
//! segment.
//!
//! Where the TUN device has no offloads the same loops run with one packet per TUN read or
//! write (tun-rs then neither splits nor coalesces), and UDP keeps its batching.

use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, SocketAddrV4};
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use quinn_udp::{RecvMeta, Transmit, UdpSocketState};
use tokio::io::Interest;
use tun_rs::{GROTable, IDEAL_BATCH_SIZE, VIRTIO_NET_HDR_LEN};

use crate::engine::Engine;
use crate::io::{Io, carry_on};

/// The largest UDP payload one GSO send may carry in total.
const MAX_GSO_BYTES: usize = 65_000;

/// Room for one received message: a UDP GRO train is at most 64 KiB.
const RECV_BUFFER: usize = 65_535;

/// WireGuard's per-packet overhead (header, counter, tag); also the largest handshake.
const SEAL_OVERHEAD: usize = 32;
const HANDSHAKE_INIT_LEN: usize = 148;

pub(crate) async fn outbound(engine: Arc<Engine>, io: Arc<Io>) {
    let Some(udp_state) = io.udp_state.as_ref() else {
        return;
    };
    let segment_room = usize::from(io.mtu) + 64;
    let mut original = vec![0u8; VIRTIO_NET_HDR_LEN + 65_535];
    let mut segments = vec![vec![0u8; segment_room]; IDEAL_BATCH_SIZE];
    let mut sizes = vec![0usize; IDEAL_BATCH_SIZE];
    let mut sealed = vec![0u8; IDEAL_BATCH_SIZE * (segment_room + SEAL_OVERHEAD)];
    let mut datagrams: Vec<(usize, SocketAddrV4)> = Vec::with_capacity(IDEAL_BATCH_SIZE);
    let mut groups: Vec<Group> = Vec::new();
    loop {
        let count = match io
            .tun
            .recv_multiple(&mut original, &mut segments, &mut sizes, 0)
            .await
        {
            Ok(count) => count,
            Err(error) if carry_on("TUN read", &error).await => continue,
            Err(_) => return,
        };
        datagrams.clear();
        {
            let table = engine.table();
            let now = Instant::now();
            let mut cursor = 0;
            for (segment, size) in segments.iter().zip(&sizes).take(count) {
                let need = (size + SEAL_OVERHEAD).max(HANDSHAKE_INIT_LEN);
                if sealed.len() < cursor + need {
                    sealed.resize(cursor + need, 0);
                }
                let packet = &segment[..*size];
                if let Some(out) = engine.encapsulate(&table, packet, &mut sealed[cursor..], now) {
                    datagrams.push((out.range.len(), out.to));
                    cursor += out.range.len();
                }
            }
        }
        group_datagrams(
            &datagrams,
            udp_state.max_gso_segments(),
            MAX_GSO_BYTES,
            &mut groups,
        );
        for group in &groups {
            let transmit = Transmit {
                destination: SocketAddr::V4(group.to),
                ecn: None,
                contents: &sealed[group.bytes.clone()],
                segment_size: (group.count > 1).then_some(group.segment_size),
                src_ip: None,
            };
            send(&io, udp_state, &transmit).await;
        }
    }
}

async fn send(io: &Io, udp_state: &UdpSocketState, transmit: &Transmit<'_>) {
    let sent = io
        .udp
        .async_io(Interest::WRITABLE, || {
            udp_state.try_send((&io.udp).into(), transmit)
        })
        .await;
    if let Err(error) = sent {
        tracing::debug!(to = %transmit.destination, %error, "UDP send failed");
    }
}

pub(crate) async fn inbound(engine: Arc<Engine>, io: Arc<Io>) {
    let Some(udp_state) = io.udp_state.as_ref() else {
        return;
    };
    let batch = quinn_udp::BATCH_SIZE.max(1);
    let mut received = vec![0u8; batch * RECV_BUFFER];
    let mut metas = vec![RecvMeta::default(); batch];
    let mut datagrams: Vec<(Range<usize>, SocketAddrV4)> = Vec::new();
    // tun-rs coalesces a flow into its first packet's buffer only when that buffer has the
    // capacity for the whole coalesced packet, so every buffer gets room for 64 KiB (memory
    // is only touched where packets are written).
    let mut packets: Vec<Vec<u8>> = (0..IDEAL_BATCH_SIZE)
        .map(|_| Vec::with_capacity(2 * VIRTIO_NET_HDR_LEN + 65_535))
        .collect();
    let mut gro_table = GROTable::default();
    let mut control = Vec::new();
    loop {
        let messages = {
            let mut slices: Vec<IoSliceMut<'_>> = received
                .chunks_mut(RECV_BUFFER)
                .map(IoSliceMut::new)
                .collect();
            io.udp
                .async_io(Interest::READABLE, || {
                    udp_state.recv((&io.udp).into(), &mut slices, &mut metas)
                })
                .await
        };
        let messages = match messages {
            Ok(messages) => messages,
            Err(error) if carry_on("UDP receive", &error).await => continue,
            Err(_) => return,
        };
        datagrams.clear();
        for (index, meta) in metas.iter().enumerate().take(messages) {
            let SocketAddr::V4(from) = meta.addr else {
                continue;
            };
            let base = index * RECV_BUFFER;
            let stride = meta.stride.max(1);
            datagrams.extend(
                (0..meta.len)
                    .step_by(stride)
                    .map(|start| (base + start..base + (start + stride).min(meta.len), from)),
            );
        }
        // Opened packets go to the TUN device a batch at a time, without the peer lock held.
        for chunk in datagrams.chunks(packets.len()) {
            let mut opened = 0;
            {
                let table = engine.table();
                let now = Instant::now();
                for (range, from) in chunk {
                    let datagram = &received[range.clone()];
                    let packet = &mut packets[opened];
                    packet.resize(VIRTIO_NET_HDR_LEN + datagram.len(), 0);
                    let out = engine.decapsulate(
                        &table,
                        datagram,
                        *from,
                        &mut packet[VIRTIO_NET_HDR_LEN..],
                        &mut control,
                        now,
                    );
                    if let Some(range) = out {
                        packet.truncate(VIRTIO_NET_HDR_LEN + range.end);
                        opened += 1;
                    }
                }
            }
            if opened > 0
                && let Err(error) = write_tun(&io, &mut gro_table, &mut packets[..opened]).await
                && !carry_on("TUN write", &error).await
            {
                return;
            }
        }
        io.send_control(&mut control).await;
    }
}

async fn write_tun(io: &Io, gro_table: &mut GROTable, packets: &mut [Vec<u8>]) -> io::Result<()> {
    io.tun
        .send_multiple(gro_table, packets, VIRTIO_NET_HDR_LEN)
        .await
        .map(|_| ())
}

/// A run of sealed datagrams that leaves in one UDP send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    /// Where the run lies in the sealed buffer.
    pub bytes: Range<usize>,
    pub to: SocketAddrV4,
    /// Size of every datagram of the run but the last, which may be shorter.
    pub segment_size: usize,
    pub count: usize,
}

/// Cuts datagrams laid out back to back (`(length, destination)` in order) into runs that
/// UDP GSO can send in one call: one destination, equal lengths except a shorter last
/// one, at most `max_segments` datagrams and `max_bytes` bytes.
pub(crate) fn group_datagrams(
    datagrams: &[(usize, SocketAddrV4)],
    max_segments: usize,
    max_bytes: usize,
    groups: &mut Vec<Group>,
) {
    groups.clear();
    let mut offset = 0;
    for &(len, to) in datagrams {
        let joins = groups.last().is_some_and(|group| {
            group.to == to
                && group.count < max_segments
                && group.bytes.len() + len <= max_bytes
                // a run ends after a shorter datagram, and takes none longer than its first
                && group.bytes.len() == group.count * group.segment_size
                && len <= group.segment_size
        });
        match groups.last_mut() {
            Some(group) if joins => {
                group.bytes.end += len;
                group.count += 1;
            }
            _ => groups.push(Group {
                bytes: offset..offset + len,
                to,
                segment_size: len,
                count: 1,
            }),
        }
        offset += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(port: u16) -> SocketAddrV4 {
        SocketAddrV4::new([198, 18, 200, 2].into(), port)
    }

    fn runs(
        datagrams: &[(usize, SocketAddrV4)],
        max_segments: usize,
    ) -> Vec<(usize, usize, usize)> {
        let mut groups = Vec::new();
        group_datagrams(datagrams, max_segments, 65_000, &mut groups);
        groups
            .iter()
            .map(|g| (g.bytes.start, g.segment_size, g.count))
            .collect()
    }

    #[test]
    fn equal_datagrams_to_one_peer_make_one_run_with_a_short_tail() {
        let datagrams = [(1452, at(1)), (1452, at(1)), (1452, at(1)), (300, at(1))];
        assert_eq!(runs(&datagrams, 64), vec![(0, 1452, 4)]);
    }

    #[test]
    fn a_run_ends_at_a_new_destination_a_longer_datagram_or_after_a_short_one() {
        let datagrams = [
            (1000, at(1)),
            (1000, at(2)),
            (1000, at(2)),
            (1200, at(2)),
            (500, at(2)),
            (500, at(2)),
        ];
        assert_eq!(
            runs(&datagrams, 64),
            vec![
                (0, 1000, 1),
                (1000, 1000, 2),
                (3000, 1200, 2),
                (4700, 500, 1)
            ]
        );
    }

    #[test]
    fn a_run_respects_the_segment_and_byte_limits() {
        let datagrams = vec![(1452, at(1)); 50];
        let by_count = runs(&datagrams, 16);
        assert_eq!(by_count.len(), 4);
        assert_eq!(by_count[3], (48 * 1452, 1452, 2));
        let by_bytes = runs(&datagrams, 64);
        assert_eq!(by_bytes[0].2, 65_000 / 1452);
        assert_eq!(by_bytes.iter().map(|r| r.2).sum::<usize>(), 50);
        assert_eq!(runs(&[], 64), vec![]);
        assert_eq!(runs(&datagrams[..3], 1).len(), 3);
    }
}
