package chronolake.delta;

import io.delta.storage.HadoopFileSystemLogStore;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Iterator;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Delta's log store for S3 through S3A when several JVMs commit to one table: each version is
 * created with a conditional put ({@code If-None-Match: *}), so exactly one writer gets it and
 * the others see {@link java.nio.file.FileAlreadyExistsException}, on which Delta checks for
 * conflicts and retries on the next version.
 *
 * <p>Delta's default S3 log store makes a commit exclusive only inside one JVM; its DynamoDB
 * store needs a second service. S3 (since 2024) and S3A (Hadoop 3.5) create an object only if
 * absent, which is all a Delta commit needs.
 *
 * <p>A put whose answer was lost can be retried by S3A and refused as a conflict with itself:
 * a refused version whose bytes equal this commit's is this commit, and it succeeds.
 */
public final class ConditionalPutLogStore extends HadoopFileSystemLogStore {

    /** Hadoop's builder option for a create that fails if the object exists (HADOOP-19256). */
    static final String CREATE_IF_ABSENT = "fs.option.create.conditional.overwrite";

    public ConditionalPutLogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite,
                      Configuration hadoopConf) throws IOException {
        FileSystem fs = path.getFileSystem(hadoopConf);
        byte[] commit = joined(actions);
        if (overwrite) {
            try (FSDataOutputStream stream = fs.create(path, true)) {
                stream.write(commit);
            }
            return;
        }
        if (!fs.hasPathCapability(path, CREATE_IF_ABSENT)) {
            throw new IOException(fs.getUri() + " cannot create an object only if it is absent "
                + "(S3A's fs.s3a.create.conditional.enabled is false), which two JVMs "
                + "committing to " + path.getParent().getParent() + " at once need; enable it");
        }
        FSDataOutputStreamBuilder<?, ?> ifAbsent = fs.createFile(path);
        ifAbsent.overwrite(false);
        ifAbsent.must(CREATE_IF_ABSENT, true);
        try {
            try (FSDataOutputStream stream = ifAbsent.build()) {
                stream.write(commit);
            }
        } catch (IOException refused) {
            if (!fs.exists(path)) {
                throw refused;
            }
            if (!Arrays.equals(read(fs, path), commit)) {
                java.nio.file.FileAlreadyExistsException taken =
                    new java.nio.file.FileAlreadyExistsException(path.toString());
                taken.initCause(refused);
                throw taken;
            }
        }
    }

    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        return false;  // an S3 object appears whole, when its put completes
    }

    private static byte[] joined(Iterator<String> actions) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        while (actions.hasNext()) {
            bytes.writeBytes((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
        }
        return bytes.toByteArray();
    }

    private static byte[] read(FileSystem fs, Path path) throws IOException {
        try (InputStream stream = fs.open(path)) {
            return stream.readAllBytes();
        }
    }
}
