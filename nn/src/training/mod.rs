//! Training helpers: one optimisation step, an evaluation pass, saving/restoring a model with
//! its optimizer, and the [`Learner`] that runs the whole loop (checkpoints, resume, logs,
//! callbacks).

mod evaluate;
mod learner;
mod state;
mod step;

pub use evaluate::{evaluate, evaluate_in_lockstep, Evaluation};
pub use learner::{
    Callback, Control, EarlyStopping, EpochReport, EpochStart, FitReport, Learner, StepEnd,
};
pub use state::{load_training_state, save_training_state, TrainingStateInfo};
pub use step::{train_step, train_step_scaled, train_step_scaled_across};
