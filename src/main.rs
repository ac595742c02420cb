fn main() {
    eprintln!("storage-scheduler: not yet implemented");
    std::process::exit(1);
}
