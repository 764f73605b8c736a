//! Where the generated code finds `tessera-nn`: as `::tessera_nn` (a direct dependency, or the
//! crate itself, which declares `extern crate self as tessera_nn`) or through the `tessera`
//! facade as `::tessera::nn`.

use proc_macro2::{Span, TokenStream};
use proc_macro_crate::{crate_name, FoundCrate};
use quote::quote;

/// The path of the `tessera-nn` crate as seen from the crate being compiled.
pub fn nn_path() -> TokenStream {
    if let Ok(found) = crate_name("tessera-nn") {
        return match found {
            FoundCrate::Itself => quote!(::tessera_nn),
            FoundCrate::Name(name) => {
                let ident = syn::Ident::new(&name, Span::call_site());
                quote!(::#ident)
            }
        };
    }
    if let Ok(found) = crate_name("tessera") {
        return match found {
            FoundCrate::Itself => quote!(::tessera::nn),
            FoundCrate::Name(name) => {
                let ident = syn::Ident::new(&name, Span::call_site());
                quote!(::#ident::nn)
            }
        };
    }
    // Neither is a dependency: the generated code will fail to resolve this path, with an
    // error naming it.
    quote!(::tessera_nn)
}
