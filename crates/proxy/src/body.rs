//! Bodies: the answer type the listeners serve, and a request body that can go to a
//! second backend when the first never took it.
//!
//! A client's body is streamed, never collected, so it can be sent once only. Yet a
//! request whose connection to a backend failed was never sent, and may go to the next
//! backend whatever its method. [`ResendableBody`] keeps the client's body in a slot that
//! the body of an attempt ([`AttemptBody`]) empties on its first poll: while the slot is
//! full, nothing was read from the client and the request can be tried again.

use std::error::Error as StdError;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use http_body_util::{Either, Full};
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};

/// What the listeners answer with: a backend's streamed answer or a page of the proxy's.
pub(crate) type ProxyBody = Either<Incoming, Full<Bytes>>;

/// A page of the proxy's own.
pub(crate) fn page(text: impl Into<Bytes>) -> ProxyBody {
    Either::Right(Full::new(text.into()))
}

type BoxError = Box<dyn StdError + Send + Sync>;

/// The client's body, waiting for the attempt that sends it.
#[derive(Debug)]
pub(crate) struct ResendableBody {
    /// `None` for a request without a body.
    slot: Option<Arc<Mutex<Option<Incoming>>>>,
    hint: SizeHint,
}

impl ResendableBody {
    pub fn new(body: Incoming) -> ResendableBody {
        if body.is_end_stream() {
            return ResendableBody {
                slot: None,
                hint: SizeHint::with_exact(0),
            };
        }
        ResendableBody {
            hint: body.size_hint(),
            slot: Some(Arc::new(Mutex::new(Some(body)))),
        }
    }

    /// The body of one attempt.
    pub fn attempt(&self) -> AttemptBody {
        AttemptBody {
            state: match &self.slot {
                None => State::Empty,
                Some(slot) => State::Waiting(slot.clone()),
            },
            hint: self.hint,
        }
    }

    /// Whether no attempt has read from the client's body yet.
    pub fn unread(&self) -> bool {
        self.slot.as_ref().is_none_or(|slot| {
            slot.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some()
        })
    }
}

/// The request body one attempt sends.
#[derive(Debug)]
pub(crate) struct AttemptBody {
    state: State,
    hint: SizeHint,
}

#[derive(Debug)]
enum State {
    Empty,
    Waiting(Arc<Mutex<Option<Incoming>>>),
    Sending(Incoming),
}

/// An attempt found the client's body already taken by another one.
#[derive(Debug, thiserror::Error)]
#[error("the request body was already sent to another backend")]
struct BodyTaken;

impl Body for AttemptBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        loop {
            match &mut this.state {
                State::Empty => return Poll::Ready(None),
                State::Waiting(slot) => {
                    let taken = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
                    match taken {
                        Some(body) => this.state = State::Sending(body),
                        None => return Poll::Ready(Some(Err(BodyTaken.into()))),
                    }
                }
                State::Sending(body) => {
                    return Pin::new(body)
                        .poll_frame(cx)
                        .map(|frame| frame.map(|f| f.map_err(Into::into)));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.state {
            State::Empty => true,
            State::Waiting(_) => false,
            State::Sending(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.state {
            State::Sending(body) => body.size_hint(),
            State::Empty | State::Waiting(_) => self.hint,
        }
    }
}
