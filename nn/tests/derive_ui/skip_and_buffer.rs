use tessera_autograd::Var;
use tessera_core::Backend;
use tessera_nn::Module;

#[derive(Module)]
struct Model<B: Backend> {
    #[module(skip, buffer)]
    stats: Var<B>,
}

fn main() {}
