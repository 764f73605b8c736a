use tessera_core::Backend;
use tessera_nn::layers::Linear;
use tessera_nn::Module;

#[derive(Module)]
struct Model<B: Backend> {
    #[module(frozen)]
    fc: Linear<B>,
}

fn main() {}
