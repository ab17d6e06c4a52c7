from gputop.cli.main import main

raise SystemExit(main())
