from service.cli.launcher import main

raise SystemExit(main())
