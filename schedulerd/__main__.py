from schedulerd.cli import main

raise SystemExit(main())
