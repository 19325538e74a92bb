"""Files on disk: episode files, recordings of topics, an episode's evidence from results files."""
