//! Training helpers: one optimisation step, an evaluation pass, and saving/restoring a model
//! with its optimizer.

mod evaluate;
mod state;
mod step;

pub use evaluate::{evaluate, Evaluation};
pub use state::{load_training_state, save_training_state, TrainingStateInfo};
pub use step::{train_step, train_step_scaled, train_step_scaled_across};
