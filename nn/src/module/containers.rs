//! `Module` and `ToBackend` for the building blocks fields are made of: a parameter (`Var<B>`),
//! `Option`, `Vec`, arrays, `Box` and tuples of modules.

use super::{child_name, Forward, Module, ModuleVisitor, ToBackend};
use tessera_autograd::Var;
use tessera_core::{Backend, Result};

/// A `Var` field is a trainable parameter named after the field.
impl<B: Backend> Module<B> for Var<B> {
    fn visit(&self, prefix: &str, visitor: &mut dyn ModuleVisitor<B>) {
        visitor.visit_parameter(prefix, self);
    }
    fn set_training(&self, _: bool) {}
    fn training_mode(&self) -> Option<bool> {
        None
    }
}

/// A copy on the other backend, keeping `requires_grad` (the gradient is not copied).
impl<B: Backend> ToBackend<B> for Var<B> {
    type On<B2: Backend> = Var<B2>;
    fn to_backend<B2: Backend>(&self, backend: &B2) -> Result<Var<B2>> {
        Ok(Var::leaf(
            self.value().to_backend(backend)?,
            self.requires_grad(),
        ))
    }
}

/// An optional module (a bias, an optional norm): visited when present, under the same name.
impl<B: Backend, M: Module<B>> Module<B> for Option<M> {
    fn visit(&self, prefix: &str, visitor: &mut dyn ModuleVisitor<B>) {
        if let Some(m) = self {
            m.visit(prefix, visitor);
        }
    }
    fn set_training(&self, training: bool) {
        if let Some(m) = self {
            m.set_training(training);
        }
    }
    fn training_mode(&self) -> Option<bool> {
        self.as_ref().and_then(Module::training_mode)
    }
}

impl<B: Backend, M: ToBackend<B>> ToBackend<B> for Option<M> {
    type On<B2: Backend> = Option<M::On<B2>>;
    fn to_backend<B2: Backend>(&self, backend: &B2) -> Result<Self::On<B2>> {
        self.as_ref().map(|m| m.to_backend(backend)).transpose()
    }
}

/// Visits `items` named `prefix.0`, `prefix.1`, ...
fn visit_items<'a, B: Backend, M: Module<B> + 'a>(
    items: impl Iterator<Item = &'a M>,
    prefix: &str,
    visitor: &mut dyn ModuleVisitor<B>,
) {
    for (i, m) in items.enumerate() {
        m.visit(&child_name(prefix, &i.to_string()), visitor);
    }
}

/// A list of modules (PyTorch's `ModuleList`): elements named `0`, `1`, ...
impl<B: Backend, M: Module<B>> Module<B> for Vec<M> {
    fn visit(&self, prefix: &str, visitor: &mut dyn ModuleVisitor<B>) {
        visit_items(self.iter(), prefix, visitor);
    }
    fn set_training(&self, training: bool) {
        self.iter().for_each(|m| m.set_training(training));
    }
    fn training_mode(&self) -> Option<bool> {
        self.iter().find_map(Module::training_mode)
    }
}

/// The elements applied in order.
impl<B: Backend, M: Forward<B>> Forward<B> for Vec<M> {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        let mut h = x.clone();
        for m in self {
            h = m.forward(&h)?;
        }
        Ok(h)
    }
}

impl<B: Backend, M: ToBackend<B>> ToBackend<B> for Vec<M> {
    type On<B2: Backend> = Vec<M::On<B2>>;
    fn to_backend<B2: Backend>(&self, backend: &B2) -> Result<Self::On<B2>> {
        self.iter().map(|m| m.to_backend(backend)).collect()
    }
}

/// A fixed number of modules: elements named `0`, `1`, ...
impl<B: Backend, M: Module<B>, const N: usize> Module<B> for [M; N] {
    fn visit(&self, prefix: &str, visitor: &mut dyn ModuleVisitor<B>) {
        visit_items(self.iter(), prefix, visitor);
    }
    fn set_training(&self, training: bool) {
        self.iter().for_each(|m| m.set_training(training));
    }
    fn training_mode(&self) -> Option<bool> {
        self.iter().find_map(Module::training_mode)
    }
}

impl<B: Backend, M: ToBackend<B>, const N: usize> ToBackend<B> for [M; N] {
    type On<B2: Backend> = [M::On<B2>; N];
    fn to_backend<B2: Backend>(&self, backend: &B2) -> Result<Self::On<B2>> {
        let moved: Vec<M::On<B2>> = self
            .iter()
            .map(|m| m.to_backend(backend))
            .collect::<Result<_>>()?;
        Ok(moved
            .try_into()
            .unwrap_or_else(|_| unreachable!("{N} elements in, {N} out")))
    }
}

/// A boxed module is the module.
impl<B: Backend, M: Module<B> + ?Sized> Module<B> for Box<M> {
    fn visit(&self, prefix: &str, visitor: &mut dyn ModuleVisitor<B>) {
        (**self).visit(prefix, visitor);
    }
    fn set_training(&self, training: bool) {
        (**self).set_training(training);
    }
    fn training_mode(&self) -> Option<bool> {
        (**self).training_mode()
    }
}

impl<B: Backend, M: ToBackend<B>> ToBackend<B> for Box<M> {
    type On<B2: Backend> = Box<M::On<B2>>;
    fn to_backend<B2: Backend>(&self, backend: &B2) -> Result<Self::On<B2>> {
        Ok(Box::new((**self).to_backend(backend)?))
    }
}

impl<B: Backend, M: Forward<B> + ?Sized> Forward<B> for Box<M> {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        (**self).forward(x)
    }
}

/// Tuples of modules (elements named `0`, `1`, ...) applied in order as a [`Forward`]: the
/// storage of [`crate::layers::Sequential`].
macro_rules! tuple_modules {
    ($($m:ident $i:tt),+) => {
        impl<B: Backend, $($m: Module<B>),+> Module<B> for ($($m,)+) {
            fn visit(&self, prefix: &str, visitor: &mut dyn ModuleVisitor<B>) {
                $(self.$i.visit(&child_name(prefix, stringify!($i)), visitor);)+
            }
            fn set_training(&self, training: bool) {
                $(self.$i.set_training(training);)+
            }
            fn training_mode(&self) -> Option<bool> {
                None$(.or_else(|| self.$i.training_mode()))+
            }
        }

        impl<B: Backend, $($m: ToBackend<B>),+> ToBackend<B> for ($($m,)+) {
            type On<B2: Backend> = ($($m::On<B2>,)+);
            fn to_backend<B2: Backend>(&self, backend: &B2) -> Result<Self::On<B2>> {
                Ok(($(self.$i.to_backend(backend)?,)+))
            }
        }

        impl<B: Backend, $($m: Forward<B>),+> Forward<B> for ($($m,)+) {
            fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
                let h = x.clone();
                $(let h = self.$i.forward(&h)?;)+
                Ok(h)
            }
        }
    };
}

tuple_modules!(M0 0);
tuple_modules!(M0 0, M1 1);
tuple_modules!(M0 0, M1 1, M2 2);
tuple_modules!(M0 0, M1 1, M2 2, M3 3);
tuple_modules!(M0 0, M1 1, M2 2, M3 3, M4 4);
tuple_modules!(M0 0, M1 1, M2 2, M3 3, M4 4, M5 5);
tuple_modules!(M0 0, M1 1, M2 2, M3 3, M4 4, M5 5, M6 6);
tuple_modules!(M0 0, M1 1, M2 2, M3 3, M4 4, M5 5, M6 6, M7 7);
tuple_modules!(M0 0, M1 1, M2 2, M3 3, M4 4, M5 5, M6 6, M7 7, M8 8);
tuple_modules!(M0 0, M1 1, M2 2, M3 3, M4 4, M5 5, M6 6, M7 7, M8 8, M9 9);
tuple_modules!(M0 0, M1 1, M2 2, M3 3, M4 4, M5 5, M6 6, M7 7, M8 8, M9 9, M10 10);
tuple_modules!(M0 0, M1 1, M2 2, M3 3, M4 4, M5 5, M6 6, M7 7, M8 8, M9 9, M10 10, M11 11);
