use tessera_nn::Module;

#[derive(Module)]
enum NotAStruct {
    A,
}

fn main() {}
