from shadow.cli import main

raise SystemExit(main())
