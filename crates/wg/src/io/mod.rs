//! The I/O shell of a device: the tasks that read the TUN device and the UDP socket, hand
//! packets to the [`Engine`](crate::engine::Engine) and write out what it returns, plus the
//! timer task. Two datapaths share the engine:
//!
//! - [`batched`]: TUN offloads and UDP GSO/GRO, many packets per system call;
//! - [`simple`]: one packet per system call, for kernels without offloads (and
//!   [`Batching::Off`](crate::Batching::Off)).

pub(crate) mod batched;
pub(crate) mod simple;

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use crate::device::BatchingInUse;
use crate::engine::{Control, Engine, MAX_SEALED};

/// How often every peer's timers run (boringtun's timers have 250 ms granularity).
const TIMER_TICK: Duration = Duration::from_millis(250);

/// Socket buffers asked for (the kernel caps them at `net.core.{r,w}mem_max`).
const SOCKET_BUFFER: usize = 4 << 20;

/// A device's TUN device and UDP socket.
pub(crate) struct Io {
    pub tun: tun_rs::AsyncDevice,
    pub udp: UdpSocket,
    /// quinn-udp's view of the socket (GSO/GRO, recvmmsg) when batching.
    pub udp_state: Option<quinn_udp::UdpSocketState>,
    pub mtu: u16,
}

impl std::fmt::Debug for Io {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io")
            .field("mtu", &self.mtu)
            .finish_non_exhaustive()
    }
}

impl Io {
    pub(crate) fn new(
        tun: tun_rs::AsyncDevice,
        udp: UdpSocket,
        batching: bool,
        mtu: u16,
    ) -> io::Result<Io> {
        let udp_state = if batching {
            let state = quinn_udp::UdpSocketState::new((&udp).into())?;
            // Best effort: a smaller buffer only costs throughput.
            let _ = state.set_recv_buffer_size((&udp).into(), SOCKET_BUFFER);
            let _ = state.set_send_buffer_size((&udp).into(), SOCKET_BUFFER);
            Some(state)
        } else {
            None
        };
        Ok(Io {
            tun,
            udp,
            udp_state,
            mtu,
        })
    }

    pub(crate) fn batching_in_use(&self) -> BatchingInUse {
        BatchingInUse {
            tun_offload: self.tun.tcp_gso(),
            udp_gso_segments: self.udp_state.as_ref().map_or(1, |s| s.max_gso_segments()),
            udp_gro_segments: self.udp_state.as_ref().map_or(1, |s| s.gro_segments()),
        }
    }

    /// Sends packets that the engine produced outside the bulk path.
    pub(crate) async fn send_control(&self, control: &mut Vec<Control>) {
        for packet in control.drain(..) {
            if let Err(error) = self.udp.send_to(&packet.packet, packet.to).await {
                tracing::debug!(to = %packet.to, %error, "UDP send failed");
            }
        }
    }
}

/// Starts the datapath and timer tasks of a device.
pub(crate) fn spawn(engine: Arc<Engine>, io: Arc<Io>) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    if io.udp_state.is_some() {
        tasks.push(tokio::spawn(batched::outbound(engine.clone(), io.clone())));
        tasks.push(tokio::spawn(batched::inbound(engine.clone(), io.clone())));
    } else {
        tasks.push(tokio::spawn(simple::outbound(engine.clone(), io.clone())));
        tasks.push(tokio::spawn(simple::inbound(engine.clone(), io.clone())));
    }
    tasks.push(tokio::spawn(timers(engine, io)));
    tasks
}

async fn timers(engine: Arc<Engine>, io: Arc<Io>) {
    let mut interval = tokio::time::interval(TIMER_TICK);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut scratch = vec![0u8; MAX_SEALED];
    let mut control = Vec::new();
    for tick in 0u64.. {
        interval.tick().await;
        engine.tick(&mut scratch, &mut control, Instant::now(), tick % 4 == 0);
        io.send_control(&mut control).await;
    }
}

/// What a loop does after an I/O error: a device that was removed under us ends the loop;
/// anything else is logged and the loop goes on after a pause (so that a persistent error
/// does not spin).
pub(crate) async fn carry_on(what: &str, error: &io::Error) -> bool {
    if error.raw_os_error() == Some(77) {
        // EBADFD: the TUN device is gone.
        tracing::warn!(%error, "{what}: device gone, stopping");
        return false;
    }
    tracing::debug!(%error, "{what} failed");
    tokio::time::sleep(Duration::from_millis(10)).await;
    true
}
