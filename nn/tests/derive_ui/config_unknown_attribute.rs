use tessera_nn::Config;

#[derive(Config)]
struct LayerConfig {
    width: usize,
    #[config(fallback = 3)]
    depth: usize,
}

fn main() {}
