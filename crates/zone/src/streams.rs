//! The skeleton both stream hubs share: the provider hub (`hub/`) and the agent hub
//! (`agents/`) each hold one long gRPC stream per peer, which opens with a hello and then
//! carries messages both ways until the peer goes, falls silent, or the zone stops.
//!
//! What differs between them (who the peer is, what its messages mean, what the periodic
//! tick does) stays in each hub. What is the same lives here once:
//! - [`first_message`]: the hello, within the hello timeout, or a status naming why not;
//! - [`StreamLoop`]: the wait for what comes next (a message, the tick, the hub's own
//!   event), with the silence deadline, the zone's shutdown and the peer's departure
//!   answered the same way on both streams.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tokio_stream::{Stream, StreamExt};
use tonic::Status;

/// What a peer sends: its messages in wire form, or the status its stream failed with.
pub(crate) type Inbound<M> = Pin<Box<dyn Stream<Item = Result<M, Status>> + Send>>;

/// What the zone sends a peer; an `Err` ends the peer's stream with that status.
pub(crate) type Outbound<M> = mpsc::UnboundedSender<Result<M, Status>>;

/// The first message of a stream, within `timeout`: every stream opens with a hello.
pub(crate) async fn first_message<M>(
    inbound: &mut Inbound<M>,
    timeout: Duration,
) -> Result<M, Status> {
    match tokio::time::timeout(timeout, inbound.next()).await {
        Err(_) => Err(Status::deadline_exceeded(
            "no hello within the hello timeout",
        )),
        Ok(Some(Ok(message))) => Ok(message),
        Ok(Some(Err(status))) => Err(status),
        Ok(None) => Err(Status::cancelled("the stream ended before its hello")),
    }
}

/// What a session loop gets next.
#[derive(Debug)]
pub(crate) enum Next<M, E> {
    /// The peer sent a message; its silence clock starts again.
    Message(M),
    /// The periodic tick: a keep-alive to send, a credential to check again.
    Tick,
    /// The hub's own event, from the future it passed to [`StreamLoop::next`].
    Own(E),
    /// The stream is over.
    End(Ending),
}

/// Why a stream is over.
#[derive(Debug)]
pub(crate) enum Ending {
    /// The zone is shutting down.
    Closing,
    /// The zone's half of the stream is gone: the peer's connection closed.
    Disconnected,
    /// Nothing came from the peer within the silence timeout.
    Silent,
    /// The peer closed its half of the stream.
    PeerClosed,
    /// The peer's half failed with this status.
    Broke(Status),
}

/// One stream's wait for what comes next. Each call to [`StreamLoop::next`] answers the
/// first of: the zone shutting down, the peer's connection gone, the peer silent past the
/// timeout, the tick, the hub's own event, a message.
#[derive(Debug)]
pub(crate) struct StreamLoop<M, O> {
    inbound: InboundDebug<M>,
    outbound: Outbound<O>,
    closing: watch::Receiver<bool>,
    tick: Interval,
    silence: Duration,
    last_heard: Instant,
}

/// The inbound stream, which has no `Debug` of its own.
struct InboundDebug<M>(Inbound<M>);

impl<M> std::fmt::Debug for InboundDebug<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Inbound")
    }
}

impl<M, O> StreamLoop<M, O> {
    /// A loop over `inbound` that ticks every `tick` (the first tick a whole period from
    /// now) and ends a stream silent for `silence`.
    pub(crate) fn new(
        inbound: Inbound<M>,
        outbound: Outbound<O>,
        closing: watch::Receiver<bool>,
        tick: Duration,
        silence: Duration,
    ) -> Self {
        let mut tick = tokio::time::interval_at(Instant::now() + tick, tick);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        StreamLoop {
            inbound: InboundDebug(inbound),
            outbound,
            closing,
            tick,
            silence,
            last_heard: Instant::now(),
        }
    }

    /// Where the zone's messages to the peer go.
    pub(crate) fn outbound(&self) -> &Outbound<O> {
        &self.outbound
    }

    /// Waits for what comes next; `own` is the hub's own event for this wait, dropped
    /// unfinished when anything else comes first.
    pub(crate) async fn next<E>(&mut self, own: impl Future<Output = E>) -> Next<M, E> {
        if *self.closing.borrow_and_update() {
            return Next::End(Ending::Closing);
        }
        let silent_at = self.last_heard + self.silence;
        let next = tokio::select! {
            _ = self.closing.wait_for(|closing| *closing) => Next::End(Ending::Closing),
            () = self.outbound.closed() => Next::End(Ending::Disconnected),
            () = tokio::time::sleep_until(silent_at) => Next::End(Ending::Silent),
            _ = self.tick.tick() => Next::Tick,
            event = own => Next::Own(event),
            received = self.inbound.0.next() => match received {
                Some(Ok(message)) => Next::Message(message),
                Some(Err(status)) => Next::End(Ending::Broke(status)),
                None => Next::End(Ending::PeerClosed),
            },
        };
        if matches!(next, Next::Message(_)) {
            self.last_heard = Instant::now();
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loop and the other ends of its channels: each test holds every end it does not
    /// close on purpose, so only that one ends the stream.
    struct Ends {
        looped: StreamLoop<u32, u32>,
        /// The peer's half: what it sends.
        peer: mpsc::UnboundedSender<Result<u32, Status>>,
        /// What the zone sends the peer.
        to_peer: mpsc::UnboundedReceiver<Result<u32, Status>>,
        closing: watch::Sender<bool>,
    }

    fn stream_loop(tick: Duration, silence: Duration) -> Ends {
        let (peer, from_peer) = mpsc::unbounded_channel();
        let (outbound, to_peer) = mpsc::unbounded_channel();
        let (closing, watching) = watch::channel(false);
        let inbound: Inbound<u32> = Box::pin(tokio_stream::wrappers::UnboundedReceiverStream::new(
            from_peer,
        ));
        let looped = StreamLoop::new(inbound, outbound, watching, tick, silence);
        Ends {
            looped,
            peer,
            to_peer,
            closing,
        }
    }

    const LONG: Duration = Duration::from_secs(3600);

    #[tokio::test(start_paused = true)]
    async fn messages_ticks_and_own_events_come_in_turn_and_silence_ends_the_stream() {
        let Ends {
            mut looped,
            peer,
            to_peer: _to_peer,
            closing: _closing,
        } = stream_loop(Duration::from_secs(10), Duration::from_secs(25));
        peer.send(Ok(7)).unwrap();
        assert!(matches!(
            looped.next(std::future::pending::<()>()).await,
            Next::Message(7)
        ));
        assert!(matches!(
            looped.next(std::future::ready("refresh")).await,
            Next::Own("refresh")
        ));
        // Ticks at 10 s and 20 s; silent 25 s after the last message.
        assert!(matches!(
            looped.next(std::future::pending::<()>()).await,
            Next::Tick
        ));
        assert!(matches!(
            looped.next(std::future::pending::<()>()).await,
            Next::Tick
        ));
        peer.send(Ok(8)).unwrap();
        assert!(matches!(
            looped.next(std::future::pending::<()>()).await,
            Next::Message(8)
        ));
        let heard_at = Instant::now();
        loop {
            match looped.next(std::future::pending::<()>()).await {
                Next::Tick => continue,
                Next::End(Ending::Silent) => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(Instant::now() - heard_at, Duration::from_secs(25));
    }

    #[tokio::test(start_paused = true)]
    async fn the_zone_closing_the_peer_leaving_and_a_failure_each_end_it_with_its_reason() {
        let Ends {
            mut looped,
            peer: _peer,
            to_peer: _to_peer,
            closing,
        } = stream_loop(LONG, LONG);
        closing.send_replace(true);
        assert!(matches!(
            looped.next(std::future::pending::<()>()).await,
            Next::End(Ending::Closing)
        ));

        let Ends {
            mut looped,
            peer,
            to_peer: _to_peer,
            closing: _closing,
        } = stream_loop(LONG, LONG);
        drop(peer);
        assert!(matches!(
            looped.next(std::future::pending::<()>()).await,
            Next::End(Ending::PeerClosed)
        ));

        let Ends {
            mut looped,
            peer,
            to_peer: _to_peer,
            closing: _closing,
        } = stream_loop(LONG, LONG);
        peer.send(Err(Status::aborted("reset"))).unwrap();
        assert!(matches!(
            looped.next(std::future::pending::<()>()).await,
            Next::End(Ending::Broke(status)) if status.message() == "reset"
        ));

        let Ends {
            mut looped,
            peer: _peer,
            to_peer,
            closing: _closing,
        } = stream_loop(LONG, LONG);
        drop(to_peer);
        assert!(matches!(
            looped.next(std::future::pending::<()>()).await,
            Next::End(Ending::Disconnected)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_without_its_hello_is_refused_with_the_reason() {
        let (to_zone, from_peer) = mpsc::unbounded_channel::<Result<u32, Status>>();
        let mut inbound: Inbound<u32> = Box::pin(
            tokio_stream::wrappers::UnboundedReceiverStream::new(from_peer),
        );
        let late = first_message(&mut inbound, Duration::from_secs(5)).await;
        assert_eq!(late.unwrap_err().code(), tonic::Code::DeadlineExceeded);
        to_zone.send(Ok(1)).unwrap();
        assert_eq!(
            first_message(&mut inbound, Duration::from_secs(5))
                .await
                .unwrap(),
            1
        );
        drop(to_zone);
        let gone = first_message(&mut inbound, Duration::from_secs(5)).await;
        assert_eq!(gone.unwrap_err().code(), tonic::Code::Cancelled);
    }
}
