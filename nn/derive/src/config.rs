//! `#[derive(Config)]`: a constructor over the required fields and a builder method per
//! defaulted field.
//!
//! ```ignore
//! #[derive(Config)]
//! pub struct LinearConfig {
//!     pub in_features: usize,
//!     pub out_features: usize,
//!     /// Whether the layer adds a bias.
//!     #[config(default = true)]
//!     pub bias: bool,
//! }
//! // generates: LinearConfig::new(in_features, out_features) and LinearConfig::bias(self, bool)
//! ```

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Expr, Fields};

struct ConfigField {
    ident: syn::Ident,
    ty: syn::Type,
    default: Option<Expr>,
    docs: Vec<syn::Attribute>,
}

pub fn expand(input: DeriveInput) -> syn::Result<TokenStream> {
    let named = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(named) => named,
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    "#[derive(Config)] needs a struct with named fields",
                ))
            }
        },
        _ => {
            return Err(syn::Error::new(
                input.ident.span(),
                "#[derive(Config)] supports structs only",
            ))
        }
    };
    let mut fields = Vec::new();
    for f in &named.named {
        let mut default = None;
        for attr in f.attrs.iter().filter(|a| a.path().is_ident("config")) {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("default") {
                    default = Some(meta.value()?.parse::<Expr>()?);
                    Ok(())
                } else {
                    Err(meta.error("unknown #[config(..)] attribute: expected `default = EXPR`"))
                }
            })?;
        }
        fields.push(ConfigField {
            ident: f.ident.clone().expect("named fields have names"),
            ty: f.ty.clone(),
            default,
            docs: f
                .attrs
                .iter()
                .filter(|a| a.path().is_ident("doc"))
                .cloned()
                .collect(),
        });
    }

    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let required: Vec<&ConfigField> = fields.iter().filter(|f| f.default.is_none()).collect();
    let args = required.iter().map(|f| {
        let (ident, ty) = (&f.ident, &f.ty);
        quote!(#ident: #ty)
    });
    let inits = fields.iter().map(|f| {
        let (ident, ty) = (&f.ident, &f.ty);
        match &f.default {
            None => quote!(#ident),
            Some(expr) => quote!(#ident: { let default: #ty = #expr; default }),
        }
    });
    let required_names: Vec<String> = required.iter().map(|f| format!("`{}`", f.ident)).collect();
    let new_doc = if required_names.is_empty() {
        format!("A `{name}` with every field at its default.")
    } else {
        format!(
            "A `{name}` with the given {} and every other field at its default.",
            required_names.join(", ")
        )
    };
    let setters = fields.iter().filter_map(|f| {
        let default = f.default.as_ref()?;
        let (ident, ty, docs) = (&f.ident, &f.ty, &f.docs);
        let default_doc = format!("Default: `{}`.", quote!(#default));
        let setter = format_ident!("{}", ident);
        Some(quote! {
            #(#docs)*
            ///
            #[doc = #default_doc]
            #[must_use]
            pub fn #setter(mut self, #ident: #ty) -> Self {
                self.#ident = #ident;
                self
            }
        })
    });
    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics #name #ty_generics #where_clause {
            #[doc = #new_doc]
            #[allow(clippy::new_without_default)]
            pub fn new(#(#args),*) -> Self {
                #name { #(#inits),* }
            }

            #(#setters)*
        }
    })
}
