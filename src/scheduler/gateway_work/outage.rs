//! Pure: whether the gateway worker may talk to the gateway at all. A gateway that cannot
//! be reached (refused, timed out, a failed TLS handshake) is down for every node alike, so
//! the first such error ends the pass, and from then on the worker sends nothing but one
//! cheap probe per backoff step until the gateway answers again. Without this, a pass
//! would try every due node (each with the client's own retries and timeouts) for as long
//! as the gateway stays down. Times are clock milliseconds.

use crate::backoff::Backoff;
use crate::gateway::client::GatewayError;
use std::time::Duration;

/// What the worker may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// The gateway answered last time: work as usual.
    Open,
    /// Down: send one probe now, and nothing else until it is answered.
    Probe,
    /// Down: send nothing until this time.
    Closed { until: u64 },
}

/// The worker's view of the gateway as a whole.
#[derive(Debug, Clone)]
pub struct Outage {
    backoff: Backoff,
    /// Down since (clock ms) and when the next probe is due; `None` while it answers.
    down: Option<(u64, u64)>,
}

/// An error that says the gateway itself is gone, not that one request was refused.
pub fn is_outage(e: &GatewayError) -> bool {
    matches!(
        e,
        GatewayError::Unreachable { .. } | GatewayError::Tls { .. }
    )
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Outage {
    /// Probes start `base` after the outage is seen and double up to `cap`.
    pub fn new(base: Duration, cap: Duration) -> Outage {
        Outage {
            backoff: Backoff::new(base, cap),
            down: None,
        }
    }

    pub fn gate(&self, now: u64) -> Gate {
        match self.down {
            None => Gate::Open,
            Some((_, probe)) if probe <= now => Gate::Probe,
            Some((_, probe)) => Gate::Closed { until: probe },
        }
    }

    /// When the worker must wake for the gateway's sake (`None`: it is up).
    pub fn next_probe(&self) -> Option<u64> {
        self.down.map(|(_, probe)| probe)
    }

    /// The outcome of a request (`error`: the transport error it ended in, if any). True
    /// when the pass must stop here: this error is an outage.
    pub fn after_request(&mut self, error: Option<&GatewayError>, now: u64) -> bool {
        match error {
            Some(e) if is_outage(e) => {
                let since = self.down.map_or(now, |(since, _)| since);
                self.down = Some((since, now + ms(self.backoff.next_delay())));
                true
            }
            _ => {
                self.backoff.reset();
                self.down = None;
                false
            }
        }
    }

    /// How long the gateway has been down, for the log line when it is back.
    pub fn down_for(&self, now: u64) -> Option<Duration> {
        self.down
            .map(|(since, _)| Duration::from_millis(now.saturating_sub(since)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unreachable() -> GatewayError {
        GatewayError::Unreachable {
            address: "gw:443".into(),
            detail: "Connection refused".into(),
        }
    }

    fn outage() -> Outage {
        Outage::new(Duration::from_secs(1), Duration::from_secs(60))
    }

    #[test]
    fn unreachable_and_tls_errors_are_outages_api_errors_are_not() {
        assert!(is_outage(&unreachable()));
        assert!(is_outage(&GatewayError::Tls {
            address: "gw:443".into(),
            detail: "UnknownIssuer".into(),
            flag: "-storage.gateway.cacert",
        }));
        assert!(!is_outage(&GatewayError::Api {
            method: "GET",
            path: "/api/x".into(),
            status: 503,
            error_code: None,
            message: "busy".into(),
        }));
        assert!(!is_outage(&GatewayError::LoginRefused {
            message: "no".into()
        }));
    }

    #[test]
    fn an_outage_stops_the_pass_and_closes_the_gate_until_one_probe() {
        let mut o = outage();
        assert_eq!(o.gate(0), Gate::Open);
        assert!(!o.after_request(None, 0), "an answer keeps the pass going");
        let api = GatewayError::Api {
            method: "POST",
            path: "/api/types/Sds/instances".into(),
            status: 500,
            error_code: Some(98),
            message: "name in use".into(),
        };
        assert!(!o.after_request(Some(&api), 0), "a refusal is one node's");
        assert!(o.after_request(Some(&unreachable()), 10_000));
        let Gate::Closed { until } = o.gate(10_000) else {
            panic!("closed after an outage: {:?}", o.gate(10_000));
        };
        assert!((10_500..=11_000).contains(&until), "{until}");
        assert_eq!(o.next_probe(), Some(until));
        assert_eq!(o.gate(until), Gate::Probe);
    }

    #[test]
    fn failed_probes_back_off_to_the_cap_and_an_answer_reopens() {
        let mut o = outage();
        let mut now = 0;
        o.after_request(Some(&unreachable()), now);
        let mut gaps = Vec::new();
        for _ in 0..10 {
            let probe = o.next_probe().unwrap();
            gaps.push(probe - now);
            now = probe;
            assert_eq!(o.gate(now), Gate::Probe);
            assert!(o.after_request(Some(&unreachable()), now));
        }
        // Equal jitter: step n waits between half and all of min(1 s * 2^n, 60 s).
        for (n, gap) in gaps.iter().enumerate() {
            let full = (1_000u64 << n).min(60_000);
            assert!((full / 2..=full).contains(gap), "step {n}: {gap} ms");
        }
        assert_eq!(o.down_for(now), Some(Duration::from_millis(now)));
        assert!(!o.after_request(None, now));
        assert_eq!(o.gate(now), Gate::Open);
        assert_eq!(o.down_for(now), None);
        // The next outage starts again from the first step.
        o.after_request(Some(&unreachable()), now);
        assert!(o.next_probe().unwrap() - now <= 1_000);
    }
}
