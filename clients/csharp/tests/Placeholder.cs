public static class P { public static int Main() { return 0; } }
