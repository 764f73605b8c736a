//! `#[derive(Module)]` and `#[derive(Config)]` for Tessera (re-exported by `tessera-nn` and the
//! `tessera` facade; use them from there).
//!
//! * [`macro@Module`] implements `Module<B>` (visiting parameters and buffers with PyTorch
//!   `state_dict` names, train/eval propagation) and `ToBackend<B>` (moving the whole model to
//!   another backend) for a struct whose fields are modules, parameters (`Var<B>`), buffers
//!   (`#[module(buffer)]`), `Option`s, `Vec`s and arrays of those, or skipped
//!   (`#[module(skip)]`, cloned when the model moves), or wrapped (`#[module(flatten)]`).
//! * [`macro@Config`] gives a configuration struct a `new` taking its required fields and one
//!   builder method per field with a `#[config(default = ...)]`.

mod config;
mod crate_path;
mod module;

use proc_macro::TokenStream;

/// Derives `Module<B>` and `ToBackend<B>`; see the `tessera_nn::module` docs for the rules.
#[proc_macro_derive(Module, attributes(module))]
pub fn derive_module(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    module::expand(input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Derives a constructor `new(required fields...)` and builder methods for the fields marked
/// `#[config(default = EXPR)]`.
#[proc_macro_derive(Config, attributes(config))]
pub fn derive_config(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    config::expand(input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
