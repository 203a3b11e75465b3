//! Batching with kernel offloads (filled in next).

use std::sync::Arc;

use crate::engine::Engine;
use crate::io::Io;

pub(crate) async fn outbound(engine: Arc<Engine>, io: Arc<Io>) {
    crate::io::simple::outbound(engine, io).await
}

pub(crate) async fn inbound(engine: Arc<Engine>, io: Arc<Io>) {
    crate::io::simple::inbound(engine, io).await
}
