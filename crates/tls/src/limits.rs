//! Who may hold a listener's connections, and for how long: the rules the accept loop
//! ([`crate::serve`]) applies, kept free of I/O so they can be tested as plain functions.
//!
//! [`Admission`] counts a listener's open connections. At every moment:
//! - at most `max` connections are open (the accept loop waits while all are taken);
//! - at most `per_source` are open from one [`Source`] (an IPv4 address, or an IPv6 /64);
//!   a connection over its source's share is refused at once;
//! - connections that have not authenticated hold at most `max - reserved` slots
//!   ([`Admitted::Ordinary`]); one more is admitted while a slot is free, but into the
//!   reserve ([`Admitted::Probation`]), and [`Timeouts::verdict`] closes it unless it
//!   authenticates within the probation time. The reserve thus serves only connections that
//!   authenticate, and an unauthenticated one holds a reserved slot for a moment at most.
//! - the listener is under pressure while three quarters of `max` or more are open. Under
//!   pressure a handshake gets [`Timeouts::pressure_handshake`] instead of
//!   [`Timeouts::handshake`], and a connection that has not authenticated is closed after
//!   [`Timeouts::pressure_idle`] with no request in flight (before its first request or
//!   between two) instead of [`Timeouts::idle`]. Pressure is judged at every check, not at
//!   admission: connections accepted before it are held to the short times too, until the
//!   listener is below the line again.
//!
//! A connection is authenticated when the service says so (a request carried a credential
//! it accepted) or when it presented a client certificate the listener verified; it keeps
//! the full idle timeout and leaves the count of unauthenticated connections.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};
use std::time::Duration;

/// Where connections come from, for the per-source limit: an IPv4 address, or the /64 of
/// an IPv6 address (one host or site commonly holds a whole /64). An IPv4-mapped IPv6
/// address is its IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Source(IpAddr);

impl Source {
    /// The source `ip` belongs to.
    pub fn of(ip: IpAddr) -> Source {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Source(IpAddr::V4(v4)),
            IpAddr::V6(v6) => {
                let prefix = u128::from(v6) & !(u128::from(u64::MAX));
                Source(IpAddr::V6(Ipv6Addr::from(prefix)))
            }
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => write!(f, "{v4}"),
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
        }
    }
}

/// A listener's connection limits, each at least 1 slot where that matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Open connections at most (at least 1).
    pub max: usize,
    /// Open connections from one source at most (1 to `max`).
    pub per_source: usize,
    /// Slots only connections that authenticate may keep (less than `max`).
    pub reserved: usize,
}

impl Limits {
    /// Limits for `max` connections: `per_source` defaults to a quarter of `max` and
    /// `reserved` to a tenth; out-of-range values are brought within range.
    pub fn new(max: usize, per_source: Option<usize>, reserved: Option<usize>) -> Limits {
        let max = max.max(1);
        Limits {
            max,
            per_source: per_source.unwrap_or(max / 4).clamp(1, max),
            reserved: reserved.unwrap_or(max / 10).min(max - 1),
        }
    }

    /// Slots connections that have not authenticated may hold outside the reserve.
    pub fn open_to_anyone(&self) -> usize {
        self.max - self.reserved
    }

    /// Whether `open` connections put the listener under pressure (three quarters of `max`).
    pub fn under_pressure(&self, open: usize) -> bool {
        open.saturating_mul(4) >= self.max.saturating_mul(3)
    }
}

/// How a connection was admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    /// Within the share of connections that have not authenticated.
    Ordinary,
    /// Into the reserve: it must authenticate within the probation time.
    Probation,
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Every slot is taken.
    Full,
    /// Its source holds its share already.
    SourceFull(Source),
}

/// The open connections of one listener, by source and by whether they authenticated.
#[derive(Debug)]
pub struct Admission {
    limits: Limits,
    open: usize,
    unauthenticated: usize,
    by_source: HashMap<Source, usize>,
}

impl Admission {
    /// No connection open yet.
    pub fn new(limits: Limits) -> Admission {
        Admission {
            limits,
            open: 0,
            unauthenticated: 0,
            by_source: HashMap::new(),
        }
    }

    /// The limits this count applies.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Connections open.
    pub fn open(&self) -> usize {
        self.open
    }

    /// Whether a connection could be admitted now (its source aside).
    pub fn has_room(&self) -> bool {
        self.open < self.limits.max
    }

    /// Whether the listener is under pressure now.
    pub fn under_pressure(&self) -> bool {
        self.limits.under_pressure(self.open)
    }

    /// Admits a connection from `source`, or says why not. An admitted connection counts as
    /// not authenticated until [`Admission::authenticated`], and until its
    /// [`Admission::release`].
    pub fn admit(&mut self, source: Source) -> Result<Admitted, Refused> {
        if !self.has_room() {
            return Err(Refused::Full);
        }
        let held = self.by_source.get(&source).copied().unwrap_or(0);
        if held >= self.limits.per_source {
            return Err(Refused::SourceFull(source));
        }
        let admitted = if self.unauthenticated >= self.limits.open_to_anyone() {
            Admitted::Probation
        } else {
            Admitted::Ordinary
        };
        self.open += 1;
        self.unauthenticated += 1;
        *self.by_source.entry(source).or_insert(0) += 1;
        Ok(admitted)
    }

    /// An open connection authenticated (call once per connection).
    pub fn authenticated(&mut self) {
        self.unauthenticated = self.unauthenticated.saturating_sub(1);
    }

    /// An open connection from `source` closed; `authenticated` says whether
    /// [`Admission::authenticated`] was called for it.
    pub fn release(&mut self, source: Source, authenticated: bool) {
        self.open = self.open.saturating_sub(1);
        if !authenticated {
            self.unauthenticated = self.unauthenticated.saturating_sub(1);
        }
        if let Some(held) = self.by_source.get_mut(&source) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                self.by_source.remove(&source);
            }
        }
    }
}

/// How long connections may take, normally and under pressure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From accept to a finished handshake.
    pub handshake: Duration,
    /// The same under pressure.
    pub pressure_handshake: Duration,
    /// With no request in flight this long, a connection is closed.
    pub idle: Duration,
    /// The same under pressure, for a connection that has not authenticated.
    pub pressure_idle: Duration,
    /// From accept until a connection admitted into the reserve must have authenticated.
    pub probation: Duration,
}

/// A connection as [`Timeouts::verdict`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionState {
    /// Since it was accepted.
    pub age: Duration,
    /// Since its last request ended (or its handshake, before the first); `None` while a
    /// request is in flight.
    pub idle: Option<Duration>,
    /// Whether it has authenticated.
    pub authenticated: bool,
    /// How it was admitted.
    pub admitted: Admitted,
}

/// What to do with a connection now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Keep it; ask again after this long (or when the pressure changes).
    Keep { check_again_in: Duration },
    /// Close it, for this reason.
    Close(Closing),
}

/// Why a connection is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closing {
    /// No request in flight for the idle timeout.
    Idle,
    /// Under pressure, not authenticated, no request in flight for the short idle timeout.
    IdleUnderPressure,
    /// Admitted into the reserve and not authenticated within the probation time.
    Probation,
}

impl Closing {
    /// The reason in words, for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Closing::Idle => "idle",
            Closing::IdleUnderPressure => "idle while the listener is under pressure",
            Closing::Probation => {
                "admitted into the reserve for authenticated connections and not authenticated in time"
            }
        }
    }
}

/// The shortest wait between two checks of one connection.
const MIN_CHECK: Duration = Duration::from_millis(10);

impl Timeouts {
    /// The time from accept to a finished handshake, for a connection admitted as
    /// `admitted`, while the listener is (or is not) under pressure.
    pub fn handshake(&self, under_pressure: bool, admitted: Admitted) -> Duration {
        let mut limit = self.handshake;
        if under_pressure {
            limit = limit.min(self.pressure_handshake);
        }
        if admitted == Admitted::Probation {
            limit = limit.min(self.probation);
        }
        limit
    }

    /// Whether to close `connection` now, and if not, when to ask again.
    pub fn verdict(&self, connection: ConnectionState, under_pressure: bool) -> Verdict {
        let mut next: Option<Duration> = None;
        if connection.admitted == Admitted::Probation && !connection.authenticated {
            match self.probation.checked_sub(connection.age) {
                Some(left) if !left.is_zero() => next = Some(left),
                _ => return Verdict::Close(Closing::Probation),
            }
        }
        let (limit, why) = if under_pressure && !connection.authenticated {
            (
                self.pressure_idle.min(self.idle),
                Closing::IdleUnderPressure,
            )
        } else {
            (self.idle, Closing::Idle)
        };
        let until_idle = match connection.idle {
            Some(idle) => match limit.checked_sub(idle) {
                Some(left) if !left.is_zero() => left,
                _ => return Verdict::Close(why),
            },
            // Nothing to decide until the request ends: look again at a fraction of the
            // shortest idle limit, so the end is noticed in time.
            None => self.idle.min(self.pressure_idle) / 4,
        };
        let wait = next.map_or(until_idle, |n| n.min(until_idle));
        Verdict::Keep {
            check_again_in: wait.max(MIN_CHECK),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn ipv6_addresses_are_grouped_by_their_64_and_mapped_ipv4_is_ipv4() {
        assert_eq!(
            Source::of(ip("2001:db8:1:2:aaaa::1")),
            Source::of(ip("2001:db8:1:2:ffff:ffff:ffff:ffff"))
        );
        assert_ne!(
            Source::of(ip("2001:db8:1:2::1")),
            Source::of(ip("2001:db8:1:3::1"))
        );
        assert_eq!(
            Source::of(ip("::ffff:192.0.2.7")),
            Source::of(ip("192.0.2.7"))
        );
        assert_ne!(Source::of(ip("192.0.2.7")), Source::of(ip("192.0.2.8")));
        assert_eq!(
            Source::of(ip("2001:db8:1:2:aaaa::1")).to_string(),
            "2001:db8:1:2::/64"
        );
        assert_eq!(Source::of(ip("192.0.2.7")).to_string(), "192.0.2.7");
    }

    #[test]
    fn limits_default_to_a_quarter_per_source_and_a_tenth_reserved() {
        let limits = Limits::new(1024, None, None);
        assert_eq!(limits.per_source, 256);
        assert_eq!(limits.reserved, 102);
        assert_eq!(limits.open_to_anyone(), 922);
        assert!(!limits.under_pressure(767));
        assert!(limits.under_pressure(768));

        // Out of range: brought within.
        let odd = Limits::new(0, Some(0), Some(5));
        assert_eq!((odd.max, odd.per_source, odd.reserved), (1, 1, 0));
        let big = Limits::new(40, Some(100), Some(40));
        assert_eq!((big.per_source, big.reserved), (40, 39));
        let small = Limits::new(3, None, None);
        assert_eq!((small.per_source, small.reserved), (1, 0));
    }

    #[test]
    fn one_source_gets_its_share_and_no_more() {
        let mut admission = Admission::new(Limits::new(40, Some(10), Some(0)));
        let one = Source::of(ip("127.0.0.2"));
        let other = Source::of(ip("127.0.0.3"));
        for _ in 0..10 {
            assert_eq!(admission.admit(one), Ok(Admitted::Ordinary));
        }
        assert_eq!(admission.admit(one), Err(Refused::SourceFull(one)));
        assert_eq!(admission.admit(other), Ok(Admitted::Ordinary));
        admission.release(one, false);
        assert_eq!(admission.admit(one), Ok(Admitted::Ordinary));
        assert_eq!(admission.open(), 11);
        // An IPv6 host cannot escape its share by changing its interface identifier.
        let mut admission = Admission::new(Limits::new(40, Some(2), Some(0)));
        assert!(admission.admit(Source::of(ip("2001:db8::1"))).is_ok());
        assert!(admission.admit(Source::of(ip("2001:db8::2"))).is_ok());
        assert!(admission.admit(Source::of(ip("2001:db8::3"))).is_err());
    }

    #[test]
    fn beyond_the_unauthenticated_share_connections_enter_the_reserve_on_probation() {
        let mut admission = Admission::new(Limits::new(10, Some(10), Some(2)));
        let a = Source::of(ip("127.0.0.2"));
        for _ in 0..8 {
            assert_eq!(admission.admit(a), Ok(Admitted::Ordinary));
        }
        assert_eq!(admission.admit(a), Ok(Admitted::Probation));
        assert_eq!(admission.admit(a), Ok(Admitted::Probation));
        assert_eq!(admission.admit(a), Err(Refused::Full));
        assert!(!admission.has_room());

        // One authenticates and leaves the unauthenticated count, which still fills its
        // share: a slot an unauthenticated connection frees goes to the reserve again.
        admission.authenticated();
        admission.release(a, false);
        assert_eq!(admission.admit(a), Ok(Admitted::Probation));
        // Below the share, the next is ordinary.
        admission.release(a, false);
        admission.release(a, false);
        assert_eq!(admission.admit(a), Ok(Admitted::Ordinary));
        // The authenticated one leaving frees a slot, not a place in the share.
        admission.release(a, true);
        assert_eq!(admission.admit(a), Ok(Admitted::Probation));
    }

    #[test]
    fn pressure_follows_the_open_count() {
        let mut admission = Admission::new(Limits::new(4, Some(4), Some(0)));
        let a = Source::of(ip("127.0.0.2"));
        for _ in 0..2 {
            admission.admit(a).unwrap();
            assert!(!admission.under_pressure());
        }
        admission.admit(a).unwrap();
        assert!(admission.under_pressure());
        admission.release(a, false);
        assert!(!admission.under_pressure());
    }

    fn timeouts() -> Timeouts {
        Timeouts {
            handshake: Duration::from_secs(10),
            pressure_handshake: Duration::from_secs(1),
            idle: Duration::from_secs(60),
            pressure_idle: Duration::from_secs(2),
            probation: Duration::from_secs(3),
        }
    }

    fn idle_for(secs: u64, authenticated: bool, admitted: Admitted) -> ConnectionState {
        ConnectionState {
            age: Duration::from_secs(secs),
            idle: Some(Duration::from_secs(secs)),
            authenticated,
            admitted,
        }
    }

    #[test]
    fn a_handshake_gets_less_time_under_pressure_or_on_probation() {
        let t = timeouts();
        assert_eq!(
            t.handshake(false, Admitted::Ordinary),
            Duration::from_secs(10)
        );
        assert_eq!(
            t.handshake(true, Admitted::Ordinary),
            Duration::from_secs(1)
        );
        assert_eq!(
            t.handshake(false, Admitted::Probation),
            Duration::from_secs(3)
        );
        assert_eq!(
            t.handshake(true, Admitted::Probation),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn under_pressure_an_unauthenticated_idle_connection_goes_sooner() {
        let t = timeouts();
        let fresh = idle_for(1, false, Admitted::Ordinary);
        assert!(matches!(t.verdict(fresh, true), Verdict::Keep { .. }));
        let quiet = idle_for(5, false, Admitted::Ordinary);
        assert_eq!(
            t.verdict(quiet, true),
            Verdict::Close(Closing::IdleUnderPressure)
        );
        assert_eq!(
            t.verdict(quiet, false),
            Verdict::Keep {
                check_again_in: Duration::from_secs(55)
            }
        );
        // Authenticated: the full idle timeout, pressure or not.
        let known = idle_for(5, true, Admitted::Ordinary);
        assert!(matches!(t.verdict(known, true), Verdict::Keep { .. }));
        assert_eq!(
            t.verdict(idle_for(60, true, Admitted::Ordinary), true),
            Verdict::Close(Closing::Idle)
        );
        // A request in flight keeps any connection; it is looked at again soon.
        let busy = ConnectionState {
            idle: None,
            ..quiet
        };
        assert_eq!(
            t.verdict(busy, true),
            Verdict::Keep {
                check_again_in: Duration::from_millis(500)
            }
        );
    }

    #[test]
    fn a_connection_in_the_reserve_must_authenticate_within_its_probation() {
        let t = timeouts();
        let young = ConnectionState {
            age: Duration::from_secs(1),
            idle: None,
            authenticated: false,
            admitted: Admitted::Probation,
        };
        assert!(matches!(t.verdict(young, false), Verdict::Keep { .. }));
        let old = ConnectionState {
            age: Duration::from_secs(3),
            ..young
        };
        assert_eq!(t.verdict(old, false), Verdict::Close(Closing::Probation));
        // Authenticated in time: it stays, under the usual idle timeout.
        let known = ConnectionState {
            authenticated: true,
            idle: Some(Duration::from_secs(30)),
            age: Duration::from_secs(40),
            ..young
        };
        assert_eq!(
            t.verdict(known, true),
            Verdict::Keep {
                check_again_in: Duration::from_secs(30)
            }
        );
        // The check comes back at the end of the probation, not at the idle timeout.
        assert_eq!(
            t.verdict(
                ConnectionState {
                    idle: Some(Duration::from_millis(500)),
                    ..young
                },
                false
            ),
            Verdict::Keep {
                check_again_in: Duration::from_secs(2)
            }
        );
    }
}
