//! `#[derive(Module)]`: the expansion.
//!
//! For `struct S<B: Backend> { a: Linear<B>, #[module(buffer)] b: Var<B>, #[module(skip)] c: usize }`
//! it generates
//! * `impl Module<B> for S<B>`: `visit` calls `a`'s visit with prefix `"a"` (a module, a `Var`
//!   as a parameter, an `Option`/`Vec`/array of those), visits `b` as a buffer and ignores `c`;
//!   `set_training` reaches every visited field; `training_mode` is the first field's that has one;
//! * `impl ToBackend<B> for S<B>` with `On<B2> = S<B2>`: every visited field moved with its own
//!   `to_backend`, every skipped field cloned.
//!
//! A struct without a backend type parameter (a parameter-free layer) gets both impls for every
//! backend. Other type parameters are allowed; for `ToBackend` each one is taken to be a module
//! type and replaced by its `On<B2>`.

use crate::crate_path::nn_path;
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{
    Data, DeriveInput, Fields, GenericParam, Generics, Ident, Index, Member, Type, TypeParamBound,
    WherePredicate,
};

/// How a field takes part in the module.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FieldKind {
    /// A sub-module, a parameter (`Var<B>`) or a container of those.
    Module,
    /// A non-trainable tensor saved with the model (`#[module(buffer)]`).
    Buffer,
    /// Not part of the module (`#[module(skip)]`): a hyper-parameter, a cache...
    Skip,
    /// A sub-module whose names are not prefixed by the field name (`#[module(flatten)]`), for
    /// wrappers: `struct BatchNorm2d<B> { #[module(flatten)] core: BatchNormCore<B> }`.
    Flatten,
}

struct FieldInfo {
    member: Member,
    name: String,
    ty: Type,
    kind: FieldKind,
    span: Span,
}

pub fn expand(input: DeriveInput) -> syn::Result<TokenStream> {
    let nn = nn_path();
    let fields = collect_fields(&input)?;
    let backend = find_backend_param(&input.generics)?;
    let module_impl = module_impl(&input, &fields, backend.as_ref(), &nn);
    let transfer_impl = to_backend_impl(&input, &fields, backend.as_ref(), &nn);
    Ok(quote! {
        #module_impl
        #transfer_impl
    })
}

fn collect_fields(input: &DeriveInput) -> syn::Result<Vec<FieldInfo>> {
    let data = match &input.data {
        Data::Struct(data) => data,
        Data::Enum(e) => {
            return Err(syn::Error::new(
                e.enum_token.span(),
                "#[derive(Module)] supports structs only: give each variant's layers a struct",
            ))
        }
        Data::Union(u) => {
            return Err(syn::Error::new(
                u.union_token.span(),
                "#[derive(Module)] supports structs only",
            ))
        }
    };
    let mut out = Vec::new();
    let fields: Vec<&syn::Field> = match &data.fields {
        Fields::Named(named) => named.named.iter().collect(),
        Fields::Unnamed(unnamed) => unnamed.unnamed.iter().collect(),
        Fields::Unit => Vec::new(),
    };
    for (i, field) in fields.into_iter().enumerate() {
        let (member, name) = match &field.ident {
            Some(ident) => (Member::Named(ident.clone()), unraw(ident)),
            None => (Member::Unnamed(Index::from(i)), i.to_string()),
        };
        out.push(FieldInfo {
            member,
            name,
            ty: field.ty.clone(),
            kind: field_kind(field)?,
            span: field.ty.span(),
        });
    }
    Ok(out)
}

/// `r#type` is named `type` in state dicts.
fn unraw(ident: &Ident) -> String {
    let s = ident.to_string();
    s.strip_prefix("r#").map(str::to_string).unwrap_or(s)
}

fn field_kind(field: &syn::Field) -> syn::Result<FieldKind> {
    let mut kind = FieldKind::Module;
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("module")) {
        attr.parse_nested_meta(|meta| {
            let new_kind = if meta.path.is_ident("skip") {
                FieldKind::Skip
            } else if meta.path.is_ident("buffer") {
                FieldKind::Buffer
            } else if meta.path.is_ident("flatten") {
                FieldKind::Flatten
            } else {
                return Err(meta.error(
                    "unknown #[module(..)] field attribute: expected `skip`, `buffer` or `flatten`",
                ));
            };
            if kind != FieldKind::Module {
                return Err(
                    meta.error("a field takes one of `skip`, `buffer` and `flatten`, not several")
                );
            }
            kind = new_kind;
            Ok(())
        })?;
    }
    Ok(kind)
}

/// The type parameter bounded by `Backend` (in the parameter list or the where clause), if any.
fn find_backend_param(generics: &Generics) -> syn::Result<Option<Ident>> {
    let names_backend = |bounds: &syn::punctuated::Punctuated<TypeParamBound, syn::Token![+]>| {
        bounds.iter().any(|b| match b {
            TypeParamBound::Trait(t) => {
                t.path.segments.last().is_some_and(|s| s.ident == "Backend")
            }
            _ => false,
        })
    };
    let mut found: Vec<Ident> = generics
        .type_params()
        .filter(|p| names_backend(&p.bounds))
        .map(|p| p.ident.clone())
        .collect();
    if let Some(where_clause) = &generics.where_clause {
        for predicate in &where_clause.predicates {
            if let WherePredicate::Type(pt) = predicate {
                if let Type::Path(tp) = &pt.bounded_ty {
                    if let Some(ident) = tp.path.get_ident() {
                        if names_backend(&pt.bounds) && !found.contains(ident) {
                            found.push(ident.clone());
                        }
                    }
                }
            }
        }
    }
    match found.len() {
        0 | 1 => Ok(found.pop()),
        _ => Err(syn::Error::new(
            generics.span(),
            "#[derive(Module)]: more than one type parameter is bounded by `Backend`",
        )),
    }
}

/// Generics of the impl: the struct's own, plus a fresh backend parameter when it has none.
fn impl_generics_with_backend(
    generics: &Generics,
    backend: Option<&Ident>,
    nn: &TokenStream,
) -> (Generics, Ident) {
    let mut generics = generics.clone();
    match backend {
        Some(b) => (generics, b.clone()),
        None => {
            let b = format_ident!("__TesseraB");
            generics
                .params
                .push(syn::parse_quote!(#b: #nn::derive_support::Backend));
            (generics, b)
        }
    }
}

fn module_impl(
    input: &DeriveInput,
    fields: &[FieldInfo],
    backend: Option<&Ident>,
    nn: &TokenStream,
) -> TokenStream {
    let name = &input.ident;
    let (_, ty_generics, _) = input.generics.split_for_impl();
    let (impl_generics_owned, b) = impl_generics_with_backend(&input.generics, backend, nn);
    let (impl_generics, _, _) = impl_generics_owned.split_for_impl();
    let mut where_clause = input
        .generics
        .where_clause
        .clone()
        .unwrap_or_else(|| syn::parse_quote!(where));

    for p in module_type_params(&input.generics, fields, backend) {
        where_clause
            .predicates
            .push(syn::parse_quote!(#p: #nn::Module<#b>));
    }
    let mut visits = Vec::new();
    let mut set_training = Vec::new();
    let mut modes = Vec::new();
    for f in fields {
        let (member, field_name) = (&f.member, &f.name);
        match f.kind {
            FieldKind::Module | FieldKind::Flatten => {
                let name = if f.kind == FieldKind::Flatten {
                    quote!(::std::string::String::from(prefix))
                } else {
                    quote!(#nn::module::child_name(prefix, #field_name))
                };
                // Spanned at the field, so that a field that is not a module is reported there:
                // "the trait bound `usize: Module<B>` is not satisfied".
                visits.push(quote_spanned! {f.span=>
                    #nn::Module::<#b>::visit(&self.#member, &#name, visitor);
                });
                set_training.push(quote_spanned! {f.span=>
                    #nn::Module::<#b>::set_training(&self.#member, training);
                });
                modes.push(quote_spanned! {f.span=>
                    .or_else(|| #nn::Module::<#b>::training_mode(&self.#member))
                });
            }
            FieldKind::Buffer => {
                visits.push(quote_spanned! {f.span=>
                    #nn::module::BufferField::<#b>::visit_buffers(
                        &self.#member,
                        &#nn::module::child_name(prefix, #field_name),
                        visitor,
                    );
                });
            }
            FieldKind::Skip => {}
        }
    }
    let unused = if visits.is_empty() {
        quote!(let _ = (prefix, visitor);)
    } else {
        quote!()
    };
    let unused_training = if set_training.is_empty() {
        quote!(let _ = training;)
    } else {
        quote!()
    };
    quote! {
        #[automatically_derived]
        impl #impl_generics #nn::Module<#b> for #name #ty_generics #where_clause {
            fn visit(
                &self,
                prefix: &str,
                visitor: &mut dyn #nn::module::ModuleVisitor<#b>,
            ) {
                #unused
                #(#visits)*
            }

            fn set_training(&self, training: bool) {
                #unused_training
                #(#set_training)*
            }

            fn training_mode(&self) -> ::core::option::Option<bool> {
                ::core::option::Option::None #(#modes)*
            }
        }
    }
}

fn to_backend_impl(
    input: &DeriveInput,
    fields: &[FieldInfo],
    backend: Option<&Ident>,
    nn: &TokenStream,
) -> TokenStream {
    let name = &input.ident;
    let (_, ty_generics, _) = input.generics.split_for_impl();
    let (impl_generics_owned, b) = impl_generics_with_backend(&input.generics, backend, nn);
    let (impl_generics, _, _) = impl_generics_owned.split_for_impl();
    let b2 = format_ident!("__TesseraB2");
    let mut where_clause = input
        .generics
        .where_clause
        .clone()
        .unwrap_or_else(|| syn::parse_quote!(where));

    // The target type: the struct with the backend replaced by B2 and every other type
    // parameter P that a moved field mentions by `<P as ToBackend<B>>::On<B2>`.
    let module_params = module_type_params(&input.generics, fields, backend);
    let target_args: Vec<TokenStream> = input
        .generics
        .params
        .iter()
        .map(|p| match p {
            GenericParam::Type(t) if Some(&t.ident) == backend => quote!(#b2),
            GenericParam::Type(t) if module_params.contains(&t.ident) => {
                let ident = &t.ident;
                where_clause
                    .predicates
                    .push(syn::parse_quote!(#ident: #nn::ToBackend<#b>));
                quote!(<#ident as #nn::ToBackend<#b>>::On<#b2>)
            }
            GenericParam::Type(t) => {
                let ident = &t.ident;
                quote!(#ident)
            }
            GenericParam::Lifetime(l) => {
                let lt = &l.lifetime;
                quote!(#lt)
            }
            GenericParam::Const(c) => {
                let ident = &c.ident;
                quote!(#ident)
            }
        })
        .collect();
    let target = if target_args.is_empty() {
        quote!(#name)
    } else {
        quote!(#name<#(#target_args),*>)
    };

    let mut inits = Vec::new();
    for f in fields {
        let member = &f.member;
        let value = match f.kind {
            FieldKind::Module | FieldKind::Buffer | FieldKind::Flatten => {
                quote_spanned! {f.span=> #nn::ToBackend::<#b>::to_backend(&self.#member, backend)? }
            }
            FieldKind::Skip => {
                quote_spanned! {f.span=> ::core::clone::Clone::clone(&self.#member) }
            }
        };
        inits.push(quote!(#member: #value));
    }
    let unused = if fields.iter().all(|f| f.kind == FieldKind::Skip) {
        quote!(let _ = backend;)
    } else {
        quote!()
    };
    quote! {
        #[automatically_derived]
        impl #impl_generics #nn::ToBackend<#b> for #name #ty_generics #where_clause {
            type On<#b2: #nn::derive_support::Backend> = #target;

            fn to_backend<#b2: #nn::derive_support::Backend>(
                &self,
                backend: &#b2,
            ) -> #nn::derive_support::Result<Self::On<#b2>> {
                #unused
                ::core::result::Result::Ok(#name { #(#inits),* })
            }
        }
    }
}

/// The type parameters other than the backend that a visited (module or buffer) field's type
/// mentions: they must be modules themselves.
fn module_type_params(
    generics: &Generics,
    fields: &[FieldInfo],
    backend: Option<&Ident>,
) -> Vec<Ident> {
    generics
        .type_params()
        .map(|p| p.ident.clone())
        .filter(|p| Some(p) != backend)
        .filter(|p| {
            fields
                .iter()
                .filter(|f| f.kind != FieldKind::Skip)
                .any(|f| mentions(&f.ty, p))
        })
        .collect()
}

/// Whether `ident` occurs in the type's tokens.
fn mentions(ty: &Type, ident: &Ident) -> bool {
    fn walk(tokens: TokenStream, ident: &Ident) -> bool {
        tokens.into_iter().any(|t| match t {
            proc_macro2::TokenTree::Ident(i) => &i == ident,
            proc_macro2::TokenTree::Group(g) => walk(g.stream(), ident),
            _ => false,
        })
    }
    walk(quote!(#ty), ident)
}
