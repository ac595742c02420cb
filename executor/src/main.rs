fn main() {
    eprintln!("storage-executor: not yet implemented");
    std::process::exit(1);
}
