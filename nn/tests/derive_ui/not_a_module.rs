use tessera_core::Backend;
use tessera_nn::layers::Linear;
use tessera_nn::Module;

#[derive(Module)]
struct Model<B: Backend> {
    fc: Linear<B>,
    hidden_size: usize,
}

fn main() {}
