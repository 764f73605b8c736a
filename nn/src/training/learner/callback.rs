//! [`Callback`]: what a [`super::Learner`] tells the code around it, and [`EarlyStopping`].

use super::EpochReport;
use crate::Result;

/// What a callback wants after an event: go on, or stop the run after this point (the run
/// ends normally; its last checkpoint is the one after the current epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Keep training.
    Continue,
    /// End the run after the current epoch.
    Stop,
}

/// An epoch about to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochStart {
    /// 0-based epoch.
    pub epoch: usize,
    /// The number of epochs of the run.
    pub epochs: usize,
    /// Steps of this epoch, and how many of them a resumed run has already done.
    pub steps: usize,
    /// Steps already done (a resumed epoch).
    pub done: usize,
}

/// A finished optimisation step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepEnd {
    /// Optimisation steps done in the whole run.
    pub global_step: usize,
    /// 0-based epoch and the steps of it done.
    pub epoch: usize,
    /// Steps of this epoch done.
    pub step_in_epoch: usize,
    /// The mean training loss of the epoch so far, when it was read back at this step (every
    /// `log_every` steps; reading it waits for the device).
    pub epoch_loss: Option<f64>,
    /// This rank's training samples per second in the epoch so far.
    pub samples_per_s: f64,
    /// Whether a whole-run checkpoint was written after this step.
    pub checkpointed: bool,
}

/// Receives a [`super::Learner`]'s events in order. Every method has a default that does
/// nothing, so a callback implements what it needs (a progress bar, a custom log, early
/// stopping, a test's simulated crash).
pub trait Callback {
    /// Before the first step of an epoch.
    fn on_epoch_start(&mut self, _: &EpochStart) -> Result<()> {
        Ok(())
    }
    /// After every optimisation step (and its checkpoint, if one was due).
    fn on_step_end(&mut self, _: &StepEnd) -> Result<Control> {
        Ok(Control::Continue)
    }
    /// After an epoch's evaluation and its checkpoint.
    fn on_epoch_end(&mut self, _: &EpochReport) -> Result<Control> {
        Ok(Control::Continue)
    }
}

/// Stops a run when the test accuracy has not improved by more than `min_delta` for
/// `patience` epochs (Keras's and Lightning's `EarlyStopping` on a maximised metric).
#[derive(Clone, Debug, PartialEq)]
pub struct EarlyStopping {
    patience: usize,
    min_delta: f64,
    best: Option<f64>,
    epochs_without_improvement: usize,
}

impl EarlyStopping {
    /// Stops after `patience` epochs without an improvement of more than `min_delta`.
    pub fn new(patience: usize, min_delta: f64) -> Self {
        EarlyStopping {
            patience,
            min_delta,
            best: None,
            epochs_without_improvement: 0,
        }
    }

    /// The best accuracy seen so far.
    pub fn best(&self) -> Option<f64> {
        self.best
    }
}

impl Callback for EarlyStopping {
    fn on_epoch_end(&mut self, report: &EpochReport) -> Result<Control> {
        let improved = self
            .best
            .is_none_or(|best| report.test_accuracy > best + self.min_delta);
        if improved {
            self.best = Some(report.test_accuracy);
            self.epochs_without_improvement = 0;
        } else {
            self.epochs_without_improvement += 1;
        }
        Ok(
            match self.epochs_without_improvement >= self.patience.max(1) {
                true => Control::Stop,
                false => Control::Continue,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epoch(epoch: usize, test_accuracy: f64) -> EpochReport {
        EpochReport {
            epoch,
            train_loss: 1.0,
            samples_per_s: 1.0,
            test_accuracy,
            test_loss: 1.0,
        }
    }

    #[test]
    fn early_stopping_waits_patience_epochs_without_improvement() {
        let mut stop = EarlyStopping::new(2, 0.01);
        let decisions: Vec<Control> = [0.5, 0.6, 0.605, 0.7, 0.69, 0.7]
            .iter()
            .enumerate()
            .map(|(i, &a)| stop.on_epoch_end(&epoch(i + 1, a)).unwrap())
            .collect();
        use Control::*;
        assert_eq!(
            decisions,
            [Continue, Continue, Continue, Continue, Continue, Stop]
        );
        assert_eq!(stop.best(), Some(0.7));
    }
}
