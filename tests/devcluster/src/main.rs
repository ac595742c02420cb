fn main() {
    eprintln!("storage-devcluster: not yet wired");
    std::process::exit(1);
}
