//! Proptest strategies: shapes, values (with IEEE specials at a controlled rate) and layout
//! recipes that build non-contiguous tensors. Everything is made of proptest combinators, so
//! failing cases shrink.

pub mod layouts;
pub mod patterns;
pub mod shapes;
pub mod values;

pub use layouts::{
    contiguous_case, layout_recipe, tensor_case, tensor_case_from, LayoutRecipe, TensorCase,
    ViewStep,
};
pub use patterns::{
    elementwise_patterns, recipe_of_kind, same_shape_patterns, tensor_case_in_regime,
    tensor_case_of_kind, ElementwisePattern, LayoutKind, Pattern, ShapePattern, PATTERN_CASES,
};
pub use shapes::{axis, axis_subset, broadcast_pair, broadcastable_to, dim, shape, shape_with};
pub use values::{
    regime_value, regime_values, special_rate, value, values, ValueProfile, ValueRegime,
    ALL_SPECIALS, SPECIALS_NO_POS_INF,
};
