//! The timing protocol shared by every suite (and mirrored by the Python peers): warm up, pick a
//! repetition count, time each repetition, report median, min and max.

use std::hint::black_box;
use std::time::Instant;

/// How a measurement is taken. `xtask/peers/*.py` use the same numbers; keep them in step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Protocol {
    /// Warm-up runs at least this many times…
    pub min_warmup_runs: usize,
    /// …and for at least this many seconds, untimed for the statistics.
    pub min_warmup_s: f64,
    /// Without an explicit repetition count, repeat for about this many seconds…
    pub target_s: f64,
    /// …but at least this many times…
    pub min_reps: usize,
    /// …and at most this many times.
    pub max_reps: usize,
}

impl Default for Protocol {
    fn default() -> Self {
        Protocol {
            min_warmup_runs: 2,
            min_warmup_s: 0.2,
            target_s: 1.5,
            min_reps: 5,
            max_reps: 1000,
        }
    }
}

/// Summary of the timed repetitions of one measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Number of timed repetitions.
    pub reps: usize,
    /// Median seconds (mean of the two middle ones for an even count).
    pub median_s: f64,
    /// Fastest repetition, seconds.
    pub min_s: f64,
    /// Slowest repetition, seconds.
    pub max_s: f64,
}

impl Timing {
    /// Summarises repetition times in seconds; `None` when there are none.
    pub fn from_samples(samples: &[f64]) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let mid = sorted.len() / 2;
        let median_s = if sorted.len() % 2 == 1 {
            sorted[mid]
        } else {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        };
        Some(Timing {
            reps: sorted.len(),
            median_s,
            min_s: sorted[0],
            max_s: sorted[sorted.len() - 1],
        })
    }
}

impl Protocol {
    /// The protocol of suites whose repetition is a whole pass over a data set (a second or
    /// more): one warm-up run, about 3 s of repetitions, at least 3 of them.
    pub fn whole_passes() -> Self {
        Protocol {
            min_warmup_runs: 1,
            min_warmup_s: 0.0,
            target_s: 3.0,
            min_reps: 3,
            max_reps: 1000,
        }
    }

    /// For tests: one warm-up run and no warm-up time, the default repetitions otherwise.
    #[cfg(test)]
    pub fn quick() -> Self {
        Protocol {
            min_warmup_runs: 1,
            min_warmup_s: 0.0,
            ..Protocol::default()
        }
    }

    /// The repetition count when none is given: enough for [`Protocol::target_s`] at
    /// `seconds_per_run`, clamped to `[min_reps, max_reps]`.
    pub fn reps_for(&self, seconds_per_run: f64) -> usize {
        let wanted = (self.target_s / seconds_per_run.max(1e-9)).ceil();
        (wanted.min(self.max_reps as f64) as usize).clamp(self.min_reps, self.max_reps)
    }

    /// Times `run`: warm-up first, then `reps` timed repetitions (or [`Protocol::reps_for`] the
    /// fastest warm-up run when `reps` is `None`). Only the call to `run` is timed: what it
    /// returns is dropped after the clock stops. `run` must finish its work before returning
    /// (call the backend's `synchronize` inside it on asynchronous backends).
    pub fn measure<T, E>(
        &self,
        reps: Option<usize>,
        mut run: impl FnMut() -> Result<T, E>,
    ) -> Result<Timing, E> {
        let mut timed = || -> Result<f64, E> {
            let start = Instant::now();
            let out = black_box(run()?);
            let seconds = start.elapsed().as_secs_f64();
            drop(out);
            Ok(seconds)
        };
        let warmup_start = Instant::now();
        let mut fastest_warmup = f64::INFINITY;
        let mut warmup_runs = 0;
        while warmup_runs < self.min_warmup_runs
            || warmup_start.elapsed().as_secs_f64() < self.min_warmup_s
        {
            fastest_warmup = fastest_warmup.min(timed()?);
            warmup_runs += 1;
        }
        let reps = reps.unwrap_or_else(|| self.reps_for(fastest_warmup)).max(1);
        let samples = (0..reps)
            .map(|_| timed())
            .collect::<Result<Vec<f64>, E>>()?;
        Ok(Timing::from_samples(&samples).expect("at least one repetition"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_min_max_of_odd_and_even_counts() {
        let t = Timing::from_samples(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((t.reps, t.median_s, t.min_s, t.max_s), (3, 2.0, 1.0, 3.0));
        let t = Timing::from_samples(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((t.reps, t.median_s, t.min_s, t.max_s), (4, 2.5, 1.0, 4.0));
        assert!(Timing::from_samples(&[]).is_none());
    }

    #[test]
    fn repetitions_aim_at_the_target_time_within_bounds() {
        let p = Protocol::default();
        assert_eq!(p.reps_for(0.1), 15);
        assert_eq!(p.reps_for(10.0), p.min_reps);
        assert_eq!(p.reps_for(0.0), p.max_reps);
    }

    #[test]
    fn measure_warms_up_then_times_the_requested_repetitions() {
        let p = Protocol {
            min_warmup_runs: 3,
            min_warmup_s: 0.0,
            ..Protocol::default()
        };
        let mut calls = 0;
        let t = p
            .measure(Some(4), || {
                calls += 1;
                Ok::<_, ()>(calls)
            })
            .unwrap();
        assert_eq!((calls, t.reps), (7, 4));
        assert!(t.min_s <= t.median_s && t.median_s <= t.max_s);
    }

    #[test]
    fn measure_stops_at_the_first_error() {
        let mut calls = 0;
        let r = Protocol::default().measure(Some(4), || {
            calls += 1;
            if calls == 2 {
                Err("boom")
            } else {
                Ok(())
            }
        });
        assert_eq!((r, calls), (Err("boom"), 2));
    }
}
