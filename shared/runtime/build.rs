fn main() {
    // The built-in registry (include_dir) sees changed files; a new or
    // removed file changes the directories, which this tracks.
    for folder in [
        "",
        "/facets",
        "/capabilities",
        "/prompts",
        "/tools",
        "/contexts",
    ] {
        println!("cargo:rerun-if-changed=../../registry{folder}");
    }
}
